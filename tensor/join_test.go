package tensor

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConcat checks every element of the result against the input it came
// from, with one transposed (non-contiguous) and one empty input.
func TestConcat(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(19, 20))
	for _, dt := range []DType{Float32, Int64} {
		for axis := range 3 {
			shapes := []Shape{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}
			shapes[1][axis] = 5
			shapes[2][axis] = 0
			var ts []*Tensor
			var vals [][]float64
			for i, s := range shapes {
				v := uniformValues(rng, Float64, s.NumElements(), -50, 50)
				for j := range v {
					v[j] = float64(int(v[j]))
				}
				var x *Tensor
				if i == 1 {
					// Build the input as a transposed view of its transpose.
					ts2 := Shape{s[0], s[2], s[1]}
					base := FromSlice(transposeLast(v, s), ts2, Of(dt))
					x = base.Transpose(1, 2)
					base.Release()
				} else {
					x = FromSlice(v, s, Of(dt))
				}
				ts = append(ts, x)
				vals = append(vals, v)
			}
			out := Concat(axis-3, ts...)
			want := shapes[0].Clone()
			want[axis] += shapes[1][axis] + shapes[2][axis]
			if !out.Shape().Equal(want) || out.DType() != dt {
				t.Fatalf("Concat along %d: %v%v, want %v", axis, out.DType(), out.Shape(), want)
			}
			got := out.Float64s()
			for i := range got {
				pos := unravel(want, i)
				k := 0
				for pos[axis] >= shapes[k][axis] {
					pos[axis] -= shapes[k][axis]
					k++
				}
				if w := vals[k][flatIndex(shapes[k], pos)]; got[i] != w {
					t.Fatalf("Concat along %d: element %v = %v, want %v from input %d", axis, unravel(want, i), got[i], w, k)
				}
			}
			out.Release()
			for _, x := range ts {
				x.Release()
			}
		}
	}
}

// transposeLast returns the values of a [a, b, c] array laid out as
// [a, c, b].
func transposeLast(v []float64, s Shape) []float64 {
	out := make([]float64, len(v))
	for i := range s[0] {
		for j := range s[1] {
			for k := range s[2] {
				out[(i*s[2]+k)*s[1]+j] = v[(i*s[1]+j)*s[2]+k]
			}
		}
	}
	return out
}

func flatIndex(shape Shape, pos []int) int {
	at := 0
	for d, p := range pos {
		at = at*shape[d] + p
	}
	return at
}

func TestStack(t *testing.T) {
	t.Parallel()
	a := FromSlice([]float64{1, 2, 3, 4, 5, 6}, Shape{2, 3})
	b := FromSlice([]float64{10, 20, 30, 40, 50, 60}, Shape{2, 3})
	defer a.Release()
	defer b.Release()
	for _, axis := range []int{0, 1, 2, -1, -3} {
		s := Stack(axis, a, b)
		ax := axis
		if ax < 0 {
			ax += 3
		}
		for i, src := range []*Tensor{a, b} {
			part := s.Select(ax, i)
			assertClose(t, "Stack", part.Float64s(), src.Float64s(), 0, 0)
			part.Release()
		}
		want := Shape{2, 3}
		want = slices.Insert(want.Clone(), ax, 2)
		if !s.Shape().Equal(want) {
			t.Errorf("Stack along %d: shape %v, want %v", axis, s.Shape(), want)
		}
		s.Release()
	}
}

func TestSplitChunk(t *testing.T) {
	t.Parallel()
	x := Arange(0, 14, 1, Of(Float64))
	defer x.Release()
	m := x.Reshape(2, 7)
	defer m.Release()
	cases := []struct {
		name  string
		parts func() []*Tensor
		sizes []int
	}{
		{"Split sizes", func() []*Tensor { return m.Split(1, 2, 0, 5) }, []int{2, 0, 5}},
		{"Split by 3", func() []*Tensor { return m.Split(-1, 3) }, []int{3, 3, 1}},
		{"Split whole", func() []*Tensor { return m.Split(1, 7) }, []int{7}},
		{"Chunk 3", func() []*Tensor { return m.Chunk(3, 1) }, []int{3, 3, 1}},
		{"Chunk 4", func() []*Tensor { return m.Chunk(4, 1) }, []int{2, 2, 2, 1}},
		{"Chunk 6", func() []*Tensor { return m.Chunk(6, 1) }, []int{2, 2, 2, 1}},
		{"Chunk 10", func() []*Tensor { return m.Chunk(10, 1) }, []int{1, 1, 1, 1, 1, 1, 1}},
	}
	for _, c := range cases {
		parts := c.parts()
		if len(parts) != len(c.sizes) {
			t.Errorf("%s: %d parts, want sizes %v", c.name, len(parts), c.sizes)
		}
		at := 0
		for i, p := range parts {
			if i < len(c.sizes) && p.Size(1) != c.sizes[i] {
				t.Errorf("%s: part %d has %d columns, want %d", c.name, i, p.Size(1), c.sizes[i])
			}
			if !p.SharesStorage(m) {
				t.Errorf("%s: part %d is a copy, want a view", c.name, i)
			}
			want := m.Slice(1, at, at+p.Size(1))
			assertClose(t, c.name, p.Float64s(), want.Float64s(), 0, 0)
			want.Release()
			at += p.Size(1)
			p.Release()
		}
	}
	empty := Zeros(Shape{0, 2})
	defer empty.Release()
	parts := empty.Chunk(3, 0)
	if len(parts) != 3 {
		t.Errorf("Chunk(3) of an empty axis: %d parts, want 3 like torch.chunk", len(parts))
	}
	for _, p := range parts {
		p.Release()
	}
	expectPanic(t, "sum", func() { m.Split(1, 3, 3) }, "Split", "[3 3]", "7")
	expectPanic(t, "chunks", func() { m.Chunk(0, 1) }, "Chunk")
}

// TestPad compares Pad with a reference that maps each output position back
// to the input, for padding, cropping and both on different axes.
func TestPad(t *testing.T) {
	t.Parallel()
	shape := Shape{2, 3, 4}
	vals := make([]float64, shape.NumElements())
	for i := range vals {
		vals[i] = float64(i + 1)
	}
	cases := [][]int{
		{},
		{1, 2},
		{0, 0, 2, 1},
		{-1, 1, 1, -2},
		{1, 1, 0, 0, -1, 2},
		{-2, -2},
		{-4, 3},
	}
	for _, dt := range []DType{Float32, Int32} {
		x := FromSlice(vals, shape, Of(dt))
		for _, pads := range cases {
			out := Pad(x, pads, -7)
			before := make([]int, 3)
			want := shape.Clone()
			for i := 0; i < len(pads); i += 2 {
				a := 2 - i/2
				before[a] = pads[i]
				want[a] += pads[i] + pads[i+1]
			}
			if !out.Shape().Equal(want) || out.DType() != dt {
				t.Fatalf("Pad %v: %v%v, want %v", pads, out.DType(), out.Shape(), want)
			}
			got := out.Float64s()
			for i := range got {
				pos := unravel(want, i)
				w, inside := 0.0, true
				for d := range pos {
					pos[d] -= before[d]
					inside = inside && pos[d] >= 0 && pos[d] < shape[d]
				}
				if inside {
					w = vals[flatIndex(shape, pos)]
				} else {
					w = -7
				}
				if got[i] != w {
					t.Fatalf("Pad %v: element %v = %v, want %v", pads, unravel(want, i), got[i], w)
				}
			}
			out.Release()
		}
		x.Release()
	}
	x := Zeros(shape)
	defer x.Release()
	expectPanic(t, "odd", func() { Pad(x, []int{1}, 0) }, "Pad", "pairs")
	expectPanic(t, "crop", func() { Pad(x, []int{-3, -2}, 0) }, "Pad", "crop")
	expectPanic(t, "too many", func() { Pad(x, make([]int, 8), 0) }, "Pad", "[2 3 4]")
}

func TestJoinPanics(t *testing.T) {
	t.Parallel()
	a := Zeros(Shape{2, 3})
	defer a.Release()
	b := Zeros(Shape{2, 4})
	defer b.Release()
	c := Zeros(Shape{2, 3}, Of(Float64))
	defer c.Release()
	expectPanic(t, "shape", func() { Concat(0, a, b) }, "Concat", "[2 4]", "axis 0")
	expectPanic(t, "dtype", func() { Concat(1, a, c) }, "Concat", "float64")
	expectPanic(t, "none", func() { Concat(0) }, "Concat")
	expectPanic(t, "stack shape", func() { Stack(0, a, b) }, "Stack", "[2 4]")
	expectPanic(t, "stack axis", func() { Stack(3, a, a) }, "Stack", "axis 3")
}
