package autograd_test

import (
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// TestSetRequiresGrad checks that switching a layer's weights off skips
// their gradient — and, below the lowest layer still on, every gradient —
// and that backward then does less work, while the layers still on get
// the gradients they would get anyway.
func TestSetRequiresGrad(t *testing.T) {
	g := tensor.NewGenerator(3)
	x := autograd.Const(g.Normal(tensor.Shape{16, 32}, 0, 1))
	w1 := autograd.Param(g.Normal(tensor.Shape{64, 32}, 0, 0.2))
	w2 := autograd.Param(g.Normal(tensor.Shape{8, 64}, 0, 0.2))
	defer x.Release()
	defer w1.Release()
	defer w2.Release()
	run := func() (flops int64, g2 []float32) {
		h := autograd.Linear(x, w1, nil)
		a := autograd.ReLU(h)
		y := autograd.Linear(a, w2, nil)
		l := autograd.Sum(y)
		flops = tensor.CountFLOPs(func() { l.Backward() })
		g2 = w2.Grad().Float32s()
		for _, v := range []*autograd.Var{l, y, a, h} {
			v.Release()
		}
		return flops, g2
	}
	full, want := run()
	if w1.Grad() == nil {
		t.Fatal("w1 has no gradient with every layer on")
	}
	w1.ZeroGrad()
	w2.ZeroGrad()

	w1.SetRequiresGrad(false)
	part, got := run()
	if w1.Grad() != nil {
		t.Errorf("w1 got a gradient while switched off")
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("w2's gradient changed when w1 was switched off: element %d %v, want %v", i, got[i], want[i])
		}
	}
	// Off: the 64×32 weight gradient and the 64-wide input gradient below
	// the first layer's output are skipped.
	if !(part < full) {
		t.Errorf("backward did %d FLOPs with w1 off, %d with it on", part, full)
	}
	w1.SetRequiresGrad(true)
	if !w1.RequiresGrad() {
		t.Errorf("w1 does not require a gradient after switching it back on")
	}
	h := autograd.Linear(x, w1, nil)
	defer h.Release()
	defer func() {
		if recover() == nil {
			t.Errorf("SetRequiresGrad on an op's result did not panic")
		}
	}()
	h.SetRequiresGrad(false)
}
