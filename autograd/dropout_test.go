package autograd_test

import (
	"math"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

func TestDropoutGrad(t *testing.T) {
	drop := func(p float64) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var {
			return autograd.Dropout(xs[0], p, tensor.NewGenerator(17))
		}
	}
	runGradCases(t, []gradCase{
		{name: "p=0.3", inputs: []*tensor.Tensor{normal(1, 4, 5)}, f: drop(0.3)},
		{name: "p=0.5 3-D", inputs: []*tensor.Tensor{normal(2, 2, 3, 7)}, f: drop(0.5)},
		{name: "p=0", inputs: []*tensor.Tensor{normal(3, 6)}, f: drop(0)},
		{name: "p=1", inputs: []*tensor.Tensor{normal(4, 6)}, f: drop(1)},
	})
}

// TestDropoutMask checks that every output is either dropped or scaled by
// 1/(1−p), that the gradient follows the same mask, and that roughly a
// fraction p is dropped.
func TestDropoutMask(t *testing.T) {
	for _, p := range []float64{0, 0.2, 0.5, 0.9, 1} {
		const n = 4000
		x := autograd.Param(uniform(5, 1, 2, n))
		y := autograd.Dropout(x, p, tensor.NewGenerator(9))
		g := tensor.OnesLike(y.Value)
		y.BackwardWith(g)
		xs, ys, gs := x.Value.Float64s(), y.Value.Float64s(), x.Grad().Float64s()
		dropped := 0
		for i := range xs {
			switch {
			case ys[i] == 0:
				dropped++
				if gs[i] != 0 {
					t.Fatalf("p=%v: element %d dropped but gradient %v", p, i, gs[i])
				}
			case math.Abs(ys[i]-xs[i]/(1-p)) > 1e-12:
				t.Fatalf("p=%v: element %d: y=%v for x=%v", p, i, ys[i], xs[i])
			case math.Abs(gs[i]-1/(1-p)) > 1e-12:
				t.Fatalf("p=%v: element %d kept with gradient %v, want %v", p, i, gs[i], 1/(1-p))
			}
		}
		// Binomial(n, p) lies within 5 standard deviations.
		if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(dropped)-n*p) > 5*sd+1e-9 {
			t.Errorf("p=%v: dropped %d of %d", p, dropped, n)
		}
		g.Release()
		y.Release()
		x.Release()
	}
}
