package autograd_test

import (
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// reduction adapts a reduction over axes to Gradcheck's signature.
func reduction(op func(x *autograd.Var, axes ...int) *autograd.Var, axes ...int) func([]*autograd.Var) *autograd.Var {
	return func(xs []*autograd.Var) *autograd.Var { return op(xs[0], axes...) }
}

func variance(op func(x *autograd.Var, correction int, axes ...int) *autograd.Var, correction int, axes ...int) func([]*autograd.Var) *autograd.Var {
	return func(xs []*autograd.Var) *autograd.Var { return op(xs[0], correction, axes...) }
}

func TestReduceGradients(t *testing.T) {
	t.Parallel()
	cases := []opCase{
		{"Sum/all", reduction(autograd.Sum), []*tensor.Tensor{randn64(1, 3, 4)}},
		{"Sum/axis0", reduction(autograd.Sum, 0), []*tensor.Tensor{randn64(2, 3, 4)}},
		{"Sum/axes0,2", reduction(autograd.Sum, 0, 2), []*tensor.Tensor{randn64(3, 2, 3, 4)}},
		{"Sum/negative", reduction(autograd.Sum, -1), []*tensor.Tensor{randn64(4, 2, 3, 5)}},
		{"Sum/scalar", reduction(autograd.Sum), []*tensor.Tensor{randn64(5)}},
		{"SumKeepDim/axis1", reduction(autograd.SumKeepDim, 1), []*tensor.Tensor{randn64(6, 2, 3, 4)}},
		{"SumKeepDim/all", reduction(autograd.SumKeepDim), []*tensor.Tensor{randn64(7, 2, 3)}},
		{"Mean/all", reduction(autograd.Mean), []*tensor.Tensor{randn64(8, 3, 4)}},
		{"Mean/axes1,2", reduction(autograd.Mean, 1, -1), []*tensor.Tensor{randn64(9, 2, 3, 5)}},
		{"MeanKeepDim/axis0", reduction(autograd.MeanKeepDim, 0), []*tensor.Tensor{randn64(10, 3, 2)}},
		{"Max/all", reduction(autograd.Max), []*tensor.Tensor{randn64(11, 3, 4)}},
		{"Max/axis1", reduction(autograd.Max, 1), []*tensor.Tensor{randn64(12, 3, 5)}},
		{"Max/axes0,2", reduction(autograd.Max, 0, 2), []*tensor.Tensor{randn64(13, 2, 3, 4)}},
		{"MaxKeepDim/axis-1", reduction(autograd.MaxKeepDim, -1), []*tensor.Tensor{randn64(14, 2, 3, 4)}},
		// A tie of two: central differences give ½ to each, the split Max
		// makes.
		{"Max/tie", reduction(autograd.Max, 1), []*tensor.Tensor{f64([]float64{1, 3, 3, -1, 2, 0}, 2, 3)}},
		{"Min/all", reduction(autograd.Min), []*tensor.Tensor{randn64(15, 3, 4)}},
		{"Min/axis0", reduction(autograd.Min, 0), []*tensor.Tensor{randn64(16, 4, 3)}},
		{"MinKeepDim/axes", reduction(autograd.MinKeepDim, 0, 1), []*tensor.Tensor{randn64(17, 2, 3, 2)}},
		{"Variance/all/population", variance(autograd.Variance, 0), []*tensor.Tensor{randn64(18, 3, 4)}},
		{"Variance/all/sample", variance(autograd.Variance, 1), []*tensor.Tensor{randn64(19, 3, 4)}},
		{"Variance/axis1", variance(autograd.Variance, 1, 1), []*tensor.Tensor{randn64(20, 3, 5)}},
		{"Variance/axes", variance(autograd.Variance, 0, 0, -1), []*tensor.Tensor{randn64(21, 2, 3, 4)}},
		{"VarianceKeepDim/axis0", variance(autograd.VarianceKeepDim, 1, 0), []*tensor.Tensor{randn64(22, 4, 3)}},
		{"chain", func(xs []*autograd.Var) *autograd.Var {
			// mean over rows of (x − max over columns)²: a softmax-like pattern.
			x := xs[0]
			return autograd.Mean(autograd.Square(autograd.Sub(x, autograd.MaxKeepDim(x, 1))), 0)
		}, []*tensor.Tensor{randn64(23, 3, 4)}},
	}
	checkOps(t, cases)
}

// TestReduceTies checks that tied extrema share the gradient equally (like
// torch.amax and torch.amin), including ties of three, which central
// differences cannot check.
func TestReduceTies(t *testing.T) {
	t.Parallel()
	x := []float64{
		1, 3, 3, 0,
		2, 2, 2, -1,
		5, 5, 5, 5,
	}
	cases := []struct {
		name string
		f    func(*autograd.Var) *autograd.Var
		want []float64
	}{
		{"Max/axis1", func(v *autograd.Var) *autograd.Var { return autograd.Max(v, 1) }, []float64{
			0, 0.5, 0.5, 0,
			1.0 / 3, 1.0 / 3, 1.0 / 3, 0,
			0.25, 0.25, 0.25, 0.25,
		}},
		{"Max/all", func(v *autograd.Var) *autograd.Var { return autograd.Max(v) }, []float64{
			0, 0, 0, 0,
			0, 0, 0, 0,
			0.25, 0.25, 0.25, 0.25,
		}},
		{"Min/axis0", func(v *autograd.Var) *autograd.Var { return autograd.Min(v, 0) }, []float64{
			1, 0, 0, 0,
			0, 1, 1, 1,
			0, 0, 0, 0,
		}},
		{"MinKeepDim/axis1", func(v *autograd.Var) *autograd.Var { return autograd.MinKeepDim(v, 1) }, []float64{
			0, 0, 0, 1,
			0, 0, 0, 1,
			0.25, 0.25, 0.25, 0.25,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := autograd.Param(f64(x, 3, 4))
			defer v.Release()
			y := autograd.Sum(c.f(v))
			defer y.Release()
			y.Backward()
			checkClose(t, "gradient", v.Grad().Float64s(), c.want, 1e-12)
		})
	}
}

// TestReduceShapes checks the result shapes with and without kept axes.
func TestReduceShapes(t *testing.T) {
	t.Parallel()
	x := autograd.Param(randn64(1, 2, 3, 4))
	defer x.Release()
	cases := []struct {
		name string
		y    *autograd.Var
		want tensor.Shape
	}{
		{"Sum", autograd.Sum(x, 1), tensor.Shape{2, 4}},
		{"SumKeepDim", autograd.SumKeepDim(x, 1), tensor.Shape{2, 1, 4}},
		{"Mean", autograd.Mean(x), tensor.Shape{}},
		{"MeanKeepDim", autograd.MeanKeepDim(x), tensor.Shape{1, 1, 1}},
		{"Max", autograd.Max(x, 0, 2), tensor.Shape{3}},
		{"MinKeepDim", autograd.MinKeepDim(x, -1), tensor.Shape{2, 3, 1}},
		{"Variance", autograd.Variance(x, 1, 0), tensor.Shape{3, 4}},
		{"VarianceKeepDim", autograd.VarianceKeepDim(x, 1, 0), tensor.Shape{1, 3, 4}},
	}
	for _, c := range cases {
		if !c.y.Shape().Equal(c.want) {
			t.Errorf("%s: shape %v, want %v", c.name, c.y.Shape(), c.want)
		}
		c.y.Release()
	}
}
