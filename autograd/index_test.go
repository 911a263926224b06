package autograd_test

import (
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

func TestGatherGrad(t *testing.T) {
	gather := func(axis int) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var { return autograd.Gather(xs[0], axis, xs[1].Value) }
	}
	runGradCases(t, []gradCase{
		{name: "axis 1 with repeats", inputs: []*tensor.Tensor{normal(1, 3, 4), ints(tensor.Shape{3, 2}, 0, 0, 3, 1, 2, 2)}, f: gather(1)},
		{name: "axis 0", inputs: []*tensor.Tensor{normal(2, 3, 4), ints(tensor.Shape{2, 4}, 2, 0, 1, 2, 0, 0, 2, 1)}, f: gather(0)},
		{name: "axis -1 3-D", inputs: []*tensor.Tensor{normal(3, 2, 2, 3), ints(tensor.Shape{2, 2, 4}, 0, 1, 2, 0, 2, 2, 2, 1, 1, 0, 0, 0, 1, 2, 1, 2)}, f: gather(-1)},
		{name: "int32 index", inputs: []*tensor.Tensor{normal(4, 4, 3), tensor.FromSlice([]int32{3, 1, 1}, tensor.Shape{1, 3})}, f: gather(0)},
	})
}

func TestIndexSelectGrad(t *testing.T) {
	sel := func(axis int) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var { return autograd.IndexSelect(xs[0], axis, xs[1].Value) }
	}
	runGradCases(t, []gradCase{
		{name: "axis 0 with repeats", inputs: []*tensor.Tensor{normal(1, 4, 3), ints(tensor.Shape{5}, 3, 0, 3, 3, 1)}, f: sel(0)},
		{name: "axis 1", inputs: []*tensor.Tensor{normal(2, 2, 5, 2), ints(tensor.Shape{3}, 4, 0, 2)}, f: sel(1)},
		{name: "axis -1 int32", inputs: []*tensor.Tensor{normal(3, 3, 4), tensor.FromSlice([]int32{1, 1}, nil)}, f: sel(-1)},
	})
}

func TestEmbeddingGrad(t *testing.T) {
	emb := func(xs []*autograd.Var) *autograd.Var { return autograd.Embedding(xs[0], xs[1].Value) }
	runGradCases(t, []gradCase{
		{name: "2-D index with repeats", inputs: []*tensor.Tensor{normal(1, 5, 3), ints(tensor.Shape{2, 3}, 4, 0, 4, 1, 4, 2)}, f: emb},
		{name: "1-D index", inputs: []*tensor.Tensor{normal(2, 6, 2), ints(tensor.Shape{4}, 5, 5, 0, 3)}, f: emb},
		{name: "scalar index", inputs: []*tensor.Tensor{normal(3, 3, 4), ints(tensor.Shape{}, 2)}, f: emb},
	})
}

// TestEmbeddingGradCounts checks the embedding gradient on a case worked by
// hand: each row's gradient is the sum of the output gradients of the
// positions that looked it up.
func TestEmbeddingGradCounts(t *testing.T) {
	w := autograd.Param(tensor.Zeros(tensor.Shape{4, 2}, tensor.Of(tensor.Float64)))
	defer w.Release()
	idx := ints(tensor.Shape{5}, 1, 3, 1, 1, 0)
	defer idx.Release()
	y := autograd.Embedding(w, idx)
	defer y.Release()
	g := tensor.FromSlice([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, tensor.Shape{5, 2})
	defer g.Release()
	y.BackwardWith(g)
	want := []float64{9, 10, 1 + 5 + 7, 2 + 6 + 8, 0, 0, 3, 4}
	got := w.Grad().Float64s()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("gradient %v, want %v", got, want)
		}
	}
}
