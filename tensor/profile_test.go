package tensor

import (
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

// TestProfiler checks that a backend.Profiler over the CPU backend gives
// its results bit for bit, its fused kernels included, and counts each
// kind of call: the matrix product by its shapes, the elementwise
// operations by name.
func TestProfiler(t *testing.T) {
	run := func(dev Device) ([]float32, []float32, bool) {
		a := FromSlice([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Shape{4, 3}, On(dev))
		b := FromSlice([]float32{0.5, -1, 2, 0.25, 3, 1, -2, 0.75, 1.5, 2, -0.5, 1, 0, 1, 2}, Shape{3, 5}, On(dev))
		c := MatMul(a, b)
		e := c.MulScalar(0.01).Exp()
		p := FromSlice([]float32{1, 2, 3}, Shape{3}, On(dev))
		g := FromSlice([]float32{0.5, 0.25, -1}, Shape{3}, On(dev))
		buf := ZerosLike(p)
		fused := FusedSGDStep(p, g, buf, SGDParams{LR: 0.1, Momentum: 0.9, First: true})
		return ToSlice[float32](e), ToSlice[float32](p), fused
	}
	host := cpu.New()
	prof := backend.NewProfiler(host)
	we, wp, wf := run(host)
	ge, gp, gf := run(prof)
	if !slices.Equal(we, ge) || !slices.Equal(wp, gp) || wf != gf {
		t.Fatalf("profiled results %v %v (fused %v), plain %v %v (fused %v)", ge, gp, gf, we, wp, wf)
	}
	calls := map[string]int64{}
	for _, o := range prof.Times() {
		calls[o.Op] = o.Calls
		if o.Time < 0 {
			t.Errorf("%s: negative time %v", o.Op, o.Time)
		}
	}
	for op, n := range map[string]int64{"MatMul 4×5 = 4×3 · 3×5": 1, "Unary MulScalar": 1, "Unary Exp": 1} {
		if calls[op] != n {
			t.Errorf("%s: %d calls, want %d (all: %v)", op, calls[op], n, calls)
		}
	}
	if _, isFused := backend.Backend(host).(backend.FusedSGD); isFused && calls["SGDStep"] != 1 {
		t.Errorf("the CPU backend's fused SGD step ran %d times through the profiler, want 1", calls["SGDStep"])
	}
	prof.Reset()
	if n := len(prof.Times()); n != 0 {
		t.Errorf("%d kinds of call after Reset", n)
	}
	if s := backend.GELUTanhGrad.String(); s != "GELUTanhGrad" || !strings.HasPrefix(backend.UnaryOp(200).String(), "UnaryOp(") {
		t.Errorf("op names: %q, %q", s, backend.UnaryOp(200).String())
	}
}
