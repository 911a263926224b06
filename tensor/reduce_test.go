package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ewGroups returns, for each output of a reduction of shape over axes (in
// row-major order), the values it combines.
func ewGroups(vals []float64, shape Shape, axes []int) [][]float64 {
	n := 1
	for i, d := range shape {
		if !slices.Contains(axes, i) {
			n *= d
		}
	}
	g := make([][]float64, n)
	idx := make([]int, len(shape))
	for _, v := range vals {
		o := 0
		for i, d := range shape {
			if !slices.Contains(axes, i) {
				o = o*d + idx[i]
			}
		}
		g[o] = append(g[o], v)
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	return g
}

func TestReductions(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(4, 4))
	sum := func(g []float64) float64 {
		s := 0.0
		for _, x := range g {
			s += x
		}
		return s
	}
	mean := func(g []float64) float64 { return sum(g) / float64(len(g)) }
	variance := func(c int) func(g []float64) float64 {
		return func(g []float64) float64 {
			m, s := mean(g), 0.0
			for _, x := range g {
				s += (x - m) * (x - m)
			}
			return s / float64(len(g)-c)
		}
	}
	ops := []struct {
		name string
		fn   func(x *Tensor, keep bool, axes ...int) *Tensor
		ref  func(g []float64) float64
	}{
		{"Sum", func(x *Tensor, keep bool, axes ...int) *Tensor {
			if keep {
				return x.SumKeepDim(axes...)
			}
			return x.Sum(axes...)
		}, sum},
		{"Mean", func(x *Tensor, keep bool, axes ...int) *Tensor {
			if keep {
				return x.MeanKeepDim(axes...)
			}
			return x.Mean(axes...)
		}, mean},
		{"Max", func(x *Tensor, keep bool, axes ...int) *Tensor {
			if keep {
				return x.MaxKeepDim(axes...)
			}
			return x.Max(axes...)
		}, func(g []float64) float64 { return slices.Max(g) }},
		{"Min", func(x *Tensor, keep bool, axes ...int) *Tensor {
			if keep {
				return x.MinKeepDim(axes...)
			}
			return x.Min(axes...)
		}, func(g []float64) float64 { return slices.Min(g) }},
		{"Var(0)", func(x *Tensor, keep bool, axes ...int) *Tensor {
			if keep {
				return x.VarKeepDim(0, axes...)
			}
			return x.Var(0, axes...)
		}, variance(0)},
		{"Var(1)", func(x *Tensor, keep bool, axes ...int) *Tensor {
			if keep {
				return x.VarKeepDim(1, axes...)
			}
			return x.Var(1, axes...)
		}, variance(1)},
	}
	shape := Shape{2, 3, 4}
	cases := []struct {
		axes    []int // as passed
		norm    []int // normalised
		out     Shape
		outKeep Shape
	}{
		{nil, []int{0, 1, 2}, Shape{}, Shape{1, 1, 1}},
		{[]int{0}, []int{0}, Shape{3, 4}, Shape{1, 3, 4}},
		{[]int{-1}, []int{2}, Shape{2, 3}, Shape{2, 3, 1}},
		{[]int{2, 0}, []int{0, 2}, Shape{3}, Shape{1, 3, 1}},
		{[]int{1, -1}, []int{1, 2}, Shape{2}, Shape{2, 1, 1}},
	}
	for _, dt := range []DType{Float32, Float64} {
		x, vals := ewRand(r, dt, shape, -1, 1)
		xt := x.Permute(2, 0, 1) // strided input of shape [4 2 3]
		tvals := xt.Float64s()
		for _, op := range ops {
			for _, c := range cases {
				for _, keep := range []bool{false, true} {
					y := op.fn(x, keep, c.axes...)
					want := c.out
					if keep {
						want = c.outKeep
					}
					ewShape(t, op.name, y, dt, want)
					groups := ewGroups(vals, shape, c.norm)
					ref := make([]float64, len(groups))
					for i, g := range groups {
						ref[i] = op.ref(g)
					}
					ewClose(t, op.name+" "+dt.String(), y.Float64s(), ref, 1e-6, 1e-7)
					y.Release()
				}
				// The same axes of the permuted view.
				y := op.fn(xt, false, c.axes...)
				groups := ewGroups(tvals, xt.Shape(), c.norm)
				ref := make([]float64, len(groups))
				for i, g := range groups {
					ref[i] = op.ref(g)
				}
				ewClose(t, op.name+" of a permuted view", y.Float64s(), ref, 1e-6, 1e-7)
				y.Release()
			}
		}
		x.Release()
		xt.Release()
	}
	x := Zeros(Shape{2, 3})
	defer x.Release()
	ewPanics(t, "repeated axis", func() { x.Sum(1, -1) }, "Sum", "repeated")
	ewPanics(t, "axis out of range", func() { x.Mean(2) }, "Mean", "out of range")
}

func TestIntegerReductions(t *testing.T) {
	t.Parallel()
	x := FromSlice([]int32{3, -1, 7, 7, 0, -5}, Shape{2, 3})
	b := FromSlice([]bool{true, false, true, true, true, false}, Shape{2, 3})
	defer x.Release()
	defer b.Release()
	cases := []struct {
		name string
		y    *Tensor
		dt   DType
		want []int64
	}{
		{"Sum int32", x.Sum(), Int64, []int64{11}},
		{"Sum int32 axis 1", x.Sum(1), Int64, []int64{9, 2}},
		{"Sum bool", b.Sum(), Int64, []int64{4}},
		{"Max int32", x.Max(0), Int32, []int64{7, 0, 7}},
		{"Min int32", x.MinKeepDim(1), Int32, []int64{-1, -5}},
		{"ArgMax int32", x.ArgMax(1), Int64, []int64{2, 0}},
		{"ArgMin bool", b.ArgMin(1), Int64, []int64{1, 2}},
	}
	for _, c := range cases {
		if c.y.DType() != c.dt || !equalInts(c.y.Int64s(), c.want) {
			t.Errorf("%s = %v %v, want %v %v", c.name, c.y.DType(), c.y.Int64s(), c.dt, c.want)
		}
		c.y.Release()
	}
	ewPanics(t, "Mean of int32", func() { x.Mean() }, "Mean", "int32")
	h := Zeros(Shape{2}, Of(Float16))
	defer h.Release()
	ewPanics(t, "Sum of float16", func() { h.Sum() }, "Sum", "float16")
}

func TestArgMaxArgMin(t *testing.T) {
	t.Parallel()
	x := FromSlice([]float32{
		1, 5, 5, 2,
		9, 0, 9, -1,
		3, 3, 3, 3,
	}, Shape{3, 4})
	defer x.Release()
	cases := []struct {
		name  string
		y     *Tensor
		shape Shape
		want  []int64
	}{
		{"ArgMax(1)", x.ArgMax(1), Shape{3}, []int64{1, 0, 0}},
		{"ArgMax(-1)", x.ArgMax(-1), Shape{3}, []int64{1, 0, 0}},
		{"ArgMin(1)", x.ArgMin(1), Shape{3}, []int64{0, 3, 0}},
		{"ArgMax(0)", x.ArgMax(0), Shape{4}, []int64{1, 0, 1, 2}},
		{"ArgMin(0)", x.ArgMin(0), Shape{4}, []int64{0, 1, 2, 1}},
	}
	for _, c := range cases {
		ewShape(t, c.name, c.y, Int64, c.shape)
		if got := c.y.Int64s(); !equalInts(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
		c.y.Release()
	}
	n := FromSlice([]float64{1, math.NaN(), 3, math.NaN()}, nil)
	defer n.Release()
	am, mx := n.ArgMax(0), n.Max()
	defer am.Release()
	defer mx.Release()
	if am.Item() != 1 || !math.IsNaN(mx.Item()) {
		t.Errorf("with NaN: ArgMax %v, Max %v; want 1, NaN", am.Item(), mx.Item())
	}
}

func TestSumTo(t *testing.T) {
	t.Parallel()
	vals := make([]float64, 24)
	for i := range vals {
		vals[i] = float64(i)
	}
	x := FromSlice(vals, Shape{2, 3, 4}, Of(Float64))
	defer x.Release()
	cases := []struct {
		to   Shape
		axes []int
	}{
		{Shape{2, 3, 4}, nil},
		{Shape{3, 4}, []int{0}},
		{Shape{4}, []int{0, 1}},
		{Shape{3, 1}, []int{0, 2}},
		{Shape{1, 3, 1}, []int{0, 2}},
		{Shape{2, 1, 4}, []int{1}},
		{Shape{1}, []int{0, 1, 2}},
		{Shape{}, []int{0, 1, 2}},
		{Shape{1, 1, 1, 1}, []int{0, 1, 2}},
		{Shape{1, 2, 3, 4}, nil},
	}
	for _, c := range cases {
		y := x.SumTo(c.to)
		ewShape(t, "SumTo "+c.to.String(), y, Float64, c.to)
		groups := ewGroups(vals, x.Shape(), c.axes)
		want := make([]float64, len(groups))
		for i, g := range groups {
			for _, v := range g {
				want[i] += v
			}
		}
		ewClose(t, "SumTo "+c.to.String(), y.Float64s(), want, 0, 0)
		if c.to.Equal(x.Shape()) && !y.SharesStorage(x) {
			t.Errorf("SumTo of its own shape copied")
		}
		y.Release()
	}
	for _, bad := range []Shape{{3}, {2, 3}, {2, 2, 4}, {2, 2, 3, 4}} {
		ewPanics(t, "SumTo "+bad.String(), func() { x.SumTo(bad) }, "SumTo", bad.String())
	}
}
