package autograd_test

import (
	"runtime"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/tensor"
)

// TestMemorySteadyState runs a training-like loop (a two-layer network,
// forward, cross-entropy, backward, an SGD update) and checks that it reaches
// a steady state: after warm-up the buffer pool serves every allocation, and
// the Go heap in use after 1,000 iterations is within a few percent of that
// after 100.
func TestMemorySteadyState(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 training steps; skipped in -short mode")
	}
	g := tensor.NewGenerator(7)
	x := autograd.Const(g.Randn(tensor.Shape{32, 64}))
	defer x.Release()
	labels := tensor.FromSlice([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1}, nil)
	defer labels.Release()
	params := []*autograd.Var{
		autograd.Param(g.Uniform(tensor.Shape{128, 64}, -0.1, 0.1)),
		autograd.Param(tensor.Zeros(tensor.Shape{128})),
		autograd.Param(g.Uniform(tensor.Shape{10, 128}, -0.1, 0.1)),
		autograd.Param(tensor.Zeros(tensor.Shape{10})),
	}
	defer func() {
		for _, p := range params {
			p.Release()
		}
	}()
	step := func() float64 {
		h := autograd.Linear(x, params[0], params[1])
		a := autograd.ReLU(h)
		logits := autograd.Linear(a, params[2], params[3])
		loss := autograd.CrossEntropy(logits, labels, autograd.CrossEntropyOptions{IgnoreIndex: -100})
		loss.Backward()
		l := loss.Value.Item()
		for _, p := range params {
			p.Value.AddScaledInPlace(-0.05, p.Grad())
			p.ZeroGrad()
		}
		for _, v := range []*autograd.Var{h, a, logits, loss} {
			v.Release()
		}
		return l
	}
	heapAfter := func(iters int) (uint64, int64, float64) {
		var l float64
		for i := 0; i < iters; i++ {
			l = step()
		}
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_, misses, _ := cpu.Default().PoolStats()
		return ms.HeapInuse, misses, l
	}
	first := step()
	h100, m100, _ := heapAfter(100)
	h1000, m1000, last := heapAfter(900)
	t.Logf("heap in use after 100 iterations: %d bytes; after 1000: %d bytes (%+.2f%%); pool misses %d → %d; loss %.4f → %.4f",
		h100, h1000, 100*(float64(h1000)-float64(h100))/float64(h100), m100, m1000, first, last)
	if m1000 != m100 {
		t.Errorf("buffer pool went to the Go heap %d more times between iteration 100 and 1000", m1000-m100)
	}
	if float64(h1000) > 1.05*float64(h100) {
		t.Errorf("heap in use grew from %d to %d bytes between iteration 100 and 1000", h100, h1000)
	}
	if !(last < first) {
		t.Errorf("loss did not decrease: %v → %v", first, last)
	}
}
