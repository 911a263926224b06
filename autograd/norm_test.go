package autograd_test

import (
	"math"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

func TestBatchNormGrad(t *testing.T) {
	train := tensor.NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
	eval := tensor.NormParams{Eps: 1e-3}
	affine := func(p tensor.NormParams) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var {
			return autograd.BatchNorm(xs[0], xs[1], xs[2], nil, nil, p)
		}
	}
	plain := func(p tensor.NormParams) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var {
			return autograd.BatchNorm(xs[0], nil, nil, nil, nil, p)
		}
	}
	// Running statistics are constants of the op, made inside f so that
	// every evaluation starts from the same ones.
	runGradCases(t, []gradCase{
		{name: "train [N,C]", inputs: []*tensor.Tensor{normal(1, 4, 3), normal(2, 3), normal(3, 3)}, f: affine(train)},
		{name: "train [N,C,H,W]", inputs: []*tensor.Tensor{normal(4, 3, 2, 3, 2), normal(5, 2), normal(6, 2)}, f: affine(train)},
		{name: "train [N,C,L] no affine", inputs: []*tensor.Tensor{normal(7, 2, 3, 4)}, f: plain(train)},
		{
			name:   "train with running stats",
			inputs: []*tensor.Tensor{normal(8, 3, 2, 2, 2), normal(9, 2), normal(10, 2)},
			f: func(xs []*autograd.Var) *autograd.Var {
				rm := tensor.Zeros(tensor.Shape{2}, tensor.Of(tensor.Float64))
				rv := tensor.Ones(tensor.Shape{2}, tensor.Of(tensor.Float64))
				defer rm.Release()
				defer rv.Release()
				return autograd.BatchNorm(xs[0], xs[1], xs[2], rm, rv, train)
			},
		},
		{
			name:   "eval [N,C,H,W]",
			inputs: []*tensor.Tensor{normal(11, 2, 3, 2, 2), normal(12, 3), normal(13, 3)},
			f: func(xs []*autograd.Var) *autograd.Var {
				rm := tensor.FromSlice([]float64{0.5, -1, 0.2}, nil)
				rv := tensor.FromSlice([]float64{1.5, 0.3, 2}, nil)
				defer rm.Release()
				defer rv.Release()
				return autograd.BatchNorm(xs[0], xs[1], xs[2], rm, rv, eval)
			},
		},
		{
			name:   "eval [N,C] no affine",
			inputs: []*tensor.Tensor{normal(14, 5, 2)},
			f: func(xs []*autograd.Var) *autograd.Var {
				rm := tensor.FromSlice([]float64{0.1, 0.4}, nil)
				rv := tensor.FromSlice([]float64{0.8, 1.7}, nil)
				defer rm.Release()
				defer rv.Release()
				return autograd.BatchNorm(xs[0], nil, nil, rm, rv, eval)
			},
		},
		{
			name:   "eval weight only",
			inputs: []*tensor.Tensor{normal(15, 3, 2, 2), normal(16, 2)},
			f: func(xs []*autograd.Var) *autograd.Var {
				rm := tensor.FromSlice([]float64{0.3, -0.2}, nil)
				rv := tensor.FromSlice([]float64{0.6, 1.1}, nil)
				defer rm.Release()
				defer rv.Release()
				return autograd.BatchNorm(xs[0], xs[1], nil, rm, rv, eval)
			},
		},
		{
			name:   "train bias only",
			inputs: []*tensor.Tensor{normal(17, 4, 2, 3), normal(18, 2)},
			f: func(xs []*autograd.Var) *autograd.Var {
				return autograd.BatchNorm(xs[0], nil, xs[1], nil, nil, train)
			},
		},
	})
}

// TestBatchNormEvalKeepsStatistics checks that the backward pass of
// evaluation-mode batch norm uses the running statistics of the forward
// pass, even when they change in between (as a later training step does).
func TestBatchNormEvalKeepsStatistics(t *testing.T) {
	x := autograd.Param(normal(1, 2, 2, 3))
	w := autograd.Param(tensor.FromSlice([]float64{2, 3}, nil))
	defer x.Release()
	defer w.Release()
	rm := tensor.FromSlice([]float64{0.5, -0.5}, nil)
	rv := tensor.FromSlice([]float64{3, 0.25}, nil)
	defer rm.Release()
	defer rv.Release()
	y := autograd.BatchNorm(x, w, nil, rm, rv, tensor.NormParams{Eps: 0.01})
	defer y.Release()
	xs, ys := x.Value.Float64s(), y.Value.Float64s()
	mean, vr, ws := []float64{0.5, -0.5}, []float64{3, 0.25}, []float64{2, 3}
	for i := range xs {
		c := (i / 3) % 2
		want := (xs[i] - mean[c]) / math.Sqrt(vr[c]+0.01) * ws[c]
		if math.Abs(ys[i]-want) > 1e-12 {
			t.Fatalf("y[%d] = %v, want %v", i, ys[i], want)
		}
	}
	rm.Fill(100)
	rv.Fill(100)
	g := tensor.OnesLike(y.Value)
	defer g.Release()
	y.BackwardWith(g)
	gx, gw := x.Grad().Float64s(), w.Grad().Float64s()
	wantW := make([]float64, 2)
	for i := range xs {
		c := (i / 3) % 2
		if want := ws[c] / math.Sqrt(vr[c]+0.01); math.Abs(gx[i]-want) > 1e-12 {
			t.Fatalf("dx[%d] = %v, want %v", i, gx[i], want)
		}
		wantW[c] += (xs[i] - mean[c]) / math.Sqrt(vr[c]+0.01)
	}
	for c := range wantW {
		if math.Abs(gw[c]-wantW[c]) > 1e-12 {
			t.Errorf("dw[%d] = %v, want %v", c, gw[c], wantW[c])
		}
	}
}

func TestLayerNormGrad(t *testing.T) {
	ln := func(normSize int, eps float64, w, b bool) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var {
			var wv, bv *autograd.Var
			i := 1
			if w {
				wv = xs[i]
				i++
			}
			if b {
				bv = xs[i]
			}
			return autograd.LayerNorm(xs[0], wv, bv, normSize, eps)
		}
	}
	runGradCases(t, []gradCase{
		{name: "[3,4]", inputs: []*tensor.Tensor{normal(1, 3, 4), normal(2, 4), normal(3, 4)}, f: ln(4, 1e-5, true, true)},
		{name: "[2,3,5]", inputs: []*tensor.Tensor{normal(4, 2, 3, 5), normal(5, 5), normal(6, 5)}, f: ln(5, 1e-5, true, true)},
		{name: "two trailing axes", inputs: []*tensor.Tensor{normal(7, 2, 3, 4), normal(8, 12), normal(9, 12)}, f: ln(12, 1e-5, true, true)},
		{name: "no affine", inputs: []*tensor.Tensor{normal(10, 4, 6)}, f: ln(6, 1e-3, false, false)},
		{name: "weight only", inputs: []*tensor.Tensor{normal(11, 3, 3), normal(12, 3)}, f: ln(3, 1e-5, true, false)},
		{name: "bias only", inputs: []*tensor.Tensor{normal(13, 3, 3), normal(14, 3)}, f: ln(3, 1e-5, false, true)},
		{name: "single vector", inputs: []*tensor.Tensor{normal(15, 7), normal(16, 7), normal(17, 7)}, f: ln(7, 1e-5, true, true)},
	})
}
