package autograd_test

import (
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// weighted multiplies y by fixed weights so that a gradient that lands on
// the wrong element cannot pass unnoticed, even where Gradcheck's random
// projection is applied to a view.
func weighted(y *autograd.Var) *autograd.Var {
	w := autograd.Const(tensor.Arange(1, float64(y.Value.NumElements())+1, 1, tensor.Of(y.Value.DType())))
	defer w.Release()
	ws := autograd.Reshape(w, y.Shape()...)
	defer ws.Release()
	return autograd.Mul(y, ws)
}

func TestShapeGradients(t *testing.T) {
	t.Parallel()
	cases := []opCase{
		{"Reshape", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Reshape(xs[0], 4, -1)) }, []*tensor.Tensor{randn64(1, 2, 3, 2)}},
		{"Reshape/strided", func(xs []*autograd.Var) *autograd.Var {
			return weighted(autograd.Reshape(autograd.Transpose(xs[0], 0, 1), 6))
		}, []*tensor.Tensor{randn64(2, 2, 3)}},
		{"Flatten", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Flatten(xs[0], 1, -1)) }, []*tensor.Tensor{randn64(3, 2, 3, 2)}},
		{"Unsqueeze", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Unsqueeze(xs[0], -2)) }, []*tensor.Tensor{randn64(4, 3, 2)}},
		{"Squeeze/all", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Squeeze(xs[0])) }, []*tensor.Tensor{randn64(5, 1, 3, 1, 2)}},
		{"Squeeze/axis", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Squeeze(xs[0], 2)) }, []*tensor.Tensor{randn64(6, 1, 3, 1, 2)}},
		{"Permute", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Permute(xs[0], 2, 0, 1)) }, []*tensor.Tensor{randn64(7, 2, 3, 4)}},
		{"Permute/negative", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Permute(xs[0], -1, 1, 0)) }, []*tensor.Tensor{randn64(8, 2, 3, 4)}},
		{"Transpose", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Transpose(xs[0], -1, 0)) }, []*tensor.Tensor{randn64(9, 2, 3, 4)}},
		{"Slice", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Slice(xs[0], 1, 1, 4)) }, []*tensor.Tensor{randn64(10, 3, 5)}},
		{"Slice/negative", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Slice(xs[0], -1, -3, 10)) }, []*tensor.Tensor{randn64(11, 2, 5)}},
		{"Slice/of transposed", func(xs []*autograd.Var) *autograd.Var {
			return weighted(autograd.Slice(autograd.Transpose(xs[0], 0, 1), 0, 1, 3))
		}, []*tensor.Tensor{randn64(12, 3, 4)}},
		{"Select", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Select(xs[0], 1, 2)) }, []*tensor.Tensor{randn64(13, 2, 4, 3)}},
		{"Select/negative", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Select(xs[0], -1, -1)) }, []*tensor.Tensor{randn64(14, 2, 3)}},
		{"BroadcastTo", func(xs []*autograd.Var) *autograd.Var {
			return weighted(autograd.BroadcastTo(xs[0], tensor.Shape{2, 3, 4}))
		}, []*tensor.Tensor{randn64(15, 3, 1)}},
		{"Expand", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Expand(xs[0], 2, -1, 3)) }, []*tensor.Tensor{randn64(16, 4, 1)}},
		{"Concat", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Concat(-1, xs...)) },
			[]*tensor.Tensor{randn64(17, 2, 1), randn64(18, 2, 3), randn64(19, 2, 2)}},
		{"Concat/axis0", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Concat(0, xs[0], xs[1], xs[0])) },
			[]*tensor.Tensor{randn64(20, 1, 3), randn64(21, 2, 3)}},
		{"Stack", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Stack(1, xs...)) },
			[]*tensor.Tensor{randn64(22, 2, 3), randn64(23, 2, 3), randn64(24, 2, 3)}},
		{"Stack/last", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Stack(-1, xs...)) },
			[]*tensor.Tensor{randn64(25, 3), randn64(26, 3)}},
		{"Split", func(xs []*autograd.Var) *autograd.Var {
			p := autograd.Split(xs[0], 1, 1, 3, 2)
			return weighted(autograd.Concat(1, p[2], autograd.MulScalar(p[0], 3), autograd.Square(p[1])))
		}, []*tensor.Tensor{randn64(27, 2, 6)}},
		{"Split/partial", func(xs []*autograd.Var) *autograd.Var {
			p := autograd.Split(xs[0], 0, 2, 1)
			return weighted(p[1])
		}, []*tensor.Tensor{randn64(28, 3, 2)}},
		{"Chunk", func(xs []*autograd.Var) *autograd.Var {
			p := autograd.Chunk(xs[0], 3, -1)
			return weighted(autograd.Add(autograd.Mul(p[0], p[1]), autograd.SumKeepDim(p[2], -1)))
		}, []*tensor.Tensor{randn64(29, 2, 7)}},
		{"Pad", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Pad(xs[0], []int{1, 2}, 0.5)) }, []*tensor.Tensor{randn64(30, 2, 3)}},
		{"Pad/two axes", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Pad(xs[0], []int{0, 1, 2, 1}, 0)) }, []*tensor.Tensor{randn64(31, 2, 3, 2)}},
		{"Pad/crop", func(xs []*autograd.Var) *autograd.Var { return weighted(autograd.Pad(xs[0], []int{-1, 2, 1, -1}, -1)) }, []*tensor.Tensor{randn64(32, 3, 4)}},
	}
	checkOps(t, cases)
}

// TestShapeResults checks the shapes the ops produce.
func TestShapeResults(t *testing.T) {
	t.Parallel()
	x := autograd.Param(randn64(1, 2, 3, 4))
	defer x.Release()
	y := autograd.Param(randn64(2, 2, 3, 4))
	defer y.Release()
	cases := []struct {
		name string
		v    *autograd.Var
		want tensor.Shape
	}{
		{"Reshape", autograd.Reshape(x, -1, 4), tensor.Shape{6, 4}},
		{"Flatten", autograd.Flatten(x, 0, 1), tensor.Shape{6, 4}},
		{"Unsqueeze", autograd.Unsqueeze(x, 0), tensor.Shape{1, 2, 3, 4}},
		{"Permute", autograd.Permute(x, 1, 2, 0), tensor.Shape{3, 4, 2}},
		{"Transpose", autograd.Transpose(x, 0, 2), tensor.Shape{4, 3, 2}},
		{"Slice", autograd.Slice(x, 2, 1, 3), tensor.Shape{2, 3, 2}},
		{"Select", autograd.Select(x, 1, 0), tensor.Shape{2, 4}},
		{"Expand", autograd.Expand(x, 5, -1, -1, -1), tensor.Shape{5, 2, 3, 4}},
		{"Concat", autograd.Concat(1, x, y), tensor.Shape{2, 6, 4}},
		{"Stack", autograd.Stack(0, x, y), tensor.Shape{2, 2, 3, 4}},
		{"Pad", autograd.Pad(x, []int{1, 1, -1, 0}, 0), tensor.Shape{2, 2, 6}},
	}
	for _, c := range cases {
		if !c.v.Shape().Equal(c.want) {
			t.Errorf("%s: shape %v, want %v", c.name, c.v.Shape(), c.want)
		}
		if !c.v.RequiresGrad() {
			t.Errorf("%s: result does not require a gradient", c.name)
		}
		c.v.Release()
	}
	parts := autograd.Chunk(x, 2, 2)
	if len(parts) != 2 || !parts[0].Shape().Equal(tensor.Shape{2, 3, 2}) || !parts[1].Shape().Equal(tensor.Shape{2, 3, 2}) {
		t.Errorf("Chunk(x, 2, 2) gave %d parts", len(parts))
	}
	for _, p := range parts {
		p.Release()
	}
}

// TestSplitAccumulates checks that the parts of a split, used separately,
// give x the gradient of each part in its place.
func TestSplitAccumulates(t *testing.T) {
	t.Parallel()
	x := autograd.Param(f64([]float64{1, 2, 3, 4, 5}, 5))
	defer x.Release()
	parts := autograd.Split(x, 0, 2, 3)
	a := autograd.Sum(autograd.MulScalar(parts[0], 10))
	b := autograd.Sum(autograd.Square(parts[1]))
	loss := autograd.Add(a, b)
	loss.Backward()
	checkClose(t, "gradient", x.Grad().Float64s(), []float64{10, 10, 6, 8, 10}, 1e-12)
}
