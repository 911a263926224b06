package autograd_test

import (
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

func TestBatchNormReLUGrad(t *testing.T) {
	train := tensor.NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
	eval := tensor.NormParams{Eps: 1e-3}
	withStats := func(p tensor.NormParams, affine, bias bool) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var {
			rm := tensor.FromSlice([]float64{0.3, -0.2}, nil)
			rv := tensor.FromSlice([]float64{0.6, 1.1}, nil)
			defer rm.Release()
			defer rv.Release()
			var w, b *autograd.Var
			switch {
			case affine:
				w, b = xs[1], xs[2]
			case bias:
				b = xs[1]
			}
			return autograd.BatchNormReLU(xs[0], w, b, rm, rv, p)
		}
	}
	runGradCases(t, []gradCase{
		{name: "train [N,C,H,W]", inputs: []*tensor.Tensor{normal(21, 3, 2, 3, 2), normal(22, 2), normal(23, 2)}, f: withStats(train, true, false)},
		{name: "train no affine", inputs: []*tensor.Tensor{normal(24, 4, 2, 3)}, f: withStats(train, false, false)},
		{name: "train bias only", inputs: []*tensor.Tensor{normal(25, 4, 2, 3), normal(26, 2)}, f: withStats(train, false, true)},
		{name: "eval [N,C,H,W]", inputs: []*tensor.Tensor{normal(27, 2, 2, 2, 2), normal(28, 2), normal(29, 2)}, f: withStats(eval, true, false)},
		{name: "eval bias only", inputs: []*tensor.Tensor{normal(30, 3, 2, 2), normal(31, 2)}, f: withStats(eval, false, true)},
	})
}

// TestBatchNormReLUMatchesPair checks that the fused op gives ReLU of
// BatchNorm, and the same gradients, in float32.
func TestBatchNormReLUMatchesPair(t *testing.T) {
	g := tensor.NewGenerator(32)
	for _, training := range []bool{true, false} {
		p := tensor.NormParams{Eps: 1e-5, Momentum: 0.1, Training: training}
		xt := g.Randn(tensor.Shape{4, 3, 6, 6})
		wt, bt := g.Randn(tensor.Shape{3}), g.Randn(tensor.Shape{3})
		run := func(fused bool) (y, gx, gw, gb []float64) {
			x, w, b := autograd.Param(xt.Clone()), autograd.Param(wt.Clone()), autograd.Param(bt.Clone())
			defer x.Release()
			defer w.Release()
			defer b.Release()
			rm, rv := tensor.Zeros(tensor.Shape{3}), tensor.Ones(tensor.Shape{3})
			defer rm.Release()
			defer rv.Release()
			var out *autograd.Var
			if fused {
				out = autograd.BatchNormReLU(x, w, b, rm, rv, p)
			} else {
				bn := autograd.BatchNorm(x, w, b, rm, rv, p)
				out = autograd.ReLU(bn)
				bn.Release()
			}
			loss := autograd.Sum(autograd.Mul(out, autograd.Const(xt)))
			loss.Backward()
			y = out.Value.Float64s()
			out.Release()
			loss.Release()
			return y, x.Grad().Float64s(), w.Grad().Float64s(), b.Grad().Float64s()
		}
		y1, gx1, gw1, gb1 := run(true)
		y2, gx2, gw2, gb2 := run(false)
		for _, c := range []struct {
			name      string
			got, want []float64
		}{{"y", y1, y2}, {"dx", gx1, gx2}, {"dweight", gw1, gw2}, {"dbias", gb1, gb2}} {
			for i := range c.got {
				if d := c.got[i] - c.want[i]; d > 1e-4 || d < -1e-4 {
					t.Fatalf("training=%v: %s[%d] = %v, the pair gives %v", training, c.name, i, c.got[i], c.want[i])
				}
			}
		}
	}
}
