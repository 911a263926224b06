package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/flockml/flock/backend"
)

// randomIndices returns n indices drawn from [0, hi).
func randomIndices(rng *rand.Rand, n, hi int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(rng.IntN(hi))
	}
	return v
}

// inner is Σ a·b over all elements, in float64.
func inner(a, b *Tensor) float64 { return weightedSum(a, b.Float64s()) }

// TestGatherScatterAdjoint checks ⟨Gather(x, index), y⟩ = ⟨x, S⟩ where S is
// zeros with ScatterAddInPlace(index, y): scatter-add is gather's adjoint.
func TestGatherScatterAdjoint(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(15, 16))
	cases := []struct {
		x, index Shape
		axis     int
	}{
		{Shape{5, 4}, Shape{3, 4}, 0},
		{Shape{5, 4}, Shape{5, 7}, -1},
		{Shape{3, 4, 6}, Shape{2, 9, 5}, 1},
	}
	for _, c := range cases {
		for _, it := range []DType{Int32, Int64} {
			x := FromSlice(uniformValues(rng, Float64, c.x.NumElements(), -1, 1), c.x)
			a := x.axis("test", c.axis)
			index := FromSlice(randomIndices(rng, c.index.NumElements(), c.x[a]), c.index, Of(it))
			g := Gather(x, c.axis, index)
			if !g.Shape().Equal(c.index) {
				t.Fatalf("Gather shape %v, want %v", g.Shape(), c.index)
			}
			// Spot-check the definition at every position.
			gv, xv, iv := g.Float64s(), x.Float64s(), index.Int64s()
			xs := backend.ContiguousStrides(c.x)
			for i := range gv {
				pos := unravel(c.index, i)
				at := 0
				for d, p := range pos {
					if d == a {
						p = int(iv[i])
					}
					at += p * xs[d]
				}
				if gv[i] != xv[at] {
					t.Fatalf("Gather %v: element %d = %v, want %v", c, i, gv[i], xv[at])
				}
			}
			y := FromSlice(uniformValues(rng, Float64, c.index.NumElements(), -1, 1), c.index)
			s := ZerosLike(x)
			s.ScatterAddInPlace(c.axis, index, y)
			lhs, rhs := inner(g, y), inner(x, s)
			assertClose(t, "adjoint", []float64{lhs}, []float64{rhs}, 1e-12, 1e-12)
			for _, r := range []*Tensor{x, index, g, y, s} {
				r.Release()
			}
		}
	}
}

func TestScatterAddInPlaceStrided(t *testing.T) {
	t.Parallel()
	base := Zeros(Shape{4, 3}, Of(Float64))
	defer base.Release()
	dst := base.T() // [3, 4], not contiguous
	defer dst.Release()
	index := FromSlice([]int64{1, 1, 3, 0}, Shape{1, 4})
	defer index.Release()
	src := FromSlice([]float64{1, 2, 4, 8, 16, 32, 64, 128}, Shape{2, 4})
	defer src.Release()
	dst.ScatterAddInPlace(1, index, src)
	got := dst.Float64s()
	want := make([]float64, 12)
	for j, k := range []int{1, 1, 3, 0} {
		want[k] += []float64{1, 2, 4, 8}[j]
	}
	assertClose(t, "ScatterAddInPlace", got, want, 0, 0)
}

// TestIndexSelectAddAdjoint checks ⟨IndexSelect(x, index), y⟩ = ⟨x, A⟩ with
// A zeros after IndexAddInPlace(index, y).
func TestIndexSelectAddAdjoint(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(17, 18))
	shape := Shape{4, 5, 3}
	for axis := range 3 {
		for _, k := range []int{0, 1, 7} {
			x := FromSlice(uniformValues(rng, Float64, shape.NumElements(), -1, 1), shape)
			index := FromSlice(randomIndices(rng, k, shape[axis]), Shape{k}, Of(Int32))
			s := IndexSelect(x, axis, index)
			want := shape.Clone()
			want[axis] = k
			if !s.Shape().Equal(want) {
				t.Fatalf("IndexSelect shape %v, want %v", s.Shape(), want)
			}
			y := FromSlice(uniformValues(rng, Float64, want.NumElements(), -1, 1), want)
			acc := ZerosLike(x)
			acc.IndexAddInPlace(axis, index, y)
			assertClose(t, "adjoint", []float64{inner(s, y)}, []float64{inner(x, acc)}, 1e-12, 1e-12)
			for _, r := range []*Tensor{x, index, s, y, acc} {
				r.Release()
			}
		}
	}
}

func TestEmbedding(t *testing.T) {
	t.Parallel()
	w := FromSlice([]float32{0, 1, 10, 11, 20, 21, 30, 31}, Shape{4, 2})
	defer w.Release()
	index := FromSlice([]int64{3, 0, 3, 1, 2, 2}, Shape{2, 3})
	defer index.Release()
	e := Embedding(w, index)
	defer e.Release()
	if !e.Shape().Equal(Shape{2, 3, 2}) {
		t.Fatalf("Embedding shape %v, want [2 3 2]", e.Shape())
	}
	got := e.Float64s()
	for i, k := range index.Int64s() {
		if got[2*i] != float64(10*k) || got[2*i+1] != float64(10*k+1) {
			t.Errorf("row %d = %v, want row %d of the weight", i, got[2*i:2*i+2], k)
		}
	}
	scalar := FromSlice([]int64{2}, Shape{})
	defer scalar.Release()
	one := Embedding(w, scalar)
	defer one.Release()
	if !one.Shape().Equal(Shape{2}) || one.At(0) != 20 {
		t.Errorf("Embedding of a scalar index: %v", one)
	}
}

func TestIndexPanics(t *testing.T) {
	t.Parallel()
	x := Zeros(Shape{3, 4})
	defer x.Release()
	bad := FromSlice([]int64{0, 5}, nil)
	defer bad.Release()
	neg := FromSlice([]int32{-1, 0}, Shape{1, 2})
	defer neg.Release()
	fidx := Zeros(Shape{2})
	defer fidx.Release()
	src := Zeros(Shape{3, 3})
	defer src.Release()
	expectPanic(t, "select range", func() { IndexSelect(x, 1, bad) }, "IndexSelect", "index 5")
	expectPanic(t, "gather negative", func() { Gather(x, 0, neg) }, "Gather", "index -1")
	expectPanic(t, "dtype", func() { IndexSelect(x, 0, fidx) }, "IndexSelect", "float32")
	expectPanic(t, "rank", func() { Gather(x, 0, bad) }, "Gather", "rank")
	expectPanic(t, "add shape", func() { x.IndexAddInPlace(0, bad, src) }, "IndexAddInPlace", "[3 3]")
}

// unravel returns the coordinates of row-major position i in shape.
func unravel(shape Shape, i int) []int {
	pos := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		pos[d] = i % shape[d]
		i /= shape[d]
	}
	return pos
}
