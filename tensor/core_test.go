package tensor

import (
	"math"
	"strings"
	"testing"

	"github.com/flockml/flock/backend/cpu"
)

func iota64(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i)
	}
	return v
}

func TestFromSliceToSlice(t *testing.T) {
	t.Parallel()
	f32 := FromSlice([]float32{1.5, -2}, nil)
	f64 := FromSlice([]float64{1, 2, 3, 4, 5, 6}, Shape{2, 3})
	i32 := FromSlice([]int32{-7, 8}, Shape{2, 1})
	i64 := FromSlice([]int64{1 << 40}, Shape{})
	u8 := FromSlice([]uint8{0, 255}, nil)
	bl := FromSlice([]bool{true, false, true}, nil)
	conv := FromSlice([]float64{2.7, -2.7, 0}, nil, Of(Int32))
	for _, c := range []struct {
		x     *Tensor
		dt    DType
		shape Shape
		vals  []float64
	}{
		{f32, Float32, Shape{2}, []float64{1.5, -2}},
		{f64, Float64, Shape{2, 3}, []float64{1, 2, 3, 4, 5, 6}},
		{i32, Int32, Shape{2, 1}, []float64{-7, 8}},
		{i64, Int64, Shape{}, []float64{1 << 40}},
		{u8, Uint8, Shape{2}, []float64{0, 255}},
		{bl, Bool, Shape{3}, []float64{1, 0, 1}},
		{conv, Int32, Shape{3}, []float64{2, -2, 0}},
	} {
		ewShape(t, "FromSlice", c.x, c.dt, c.shape)
		ewClose(t, "FromSlice "+c.dt.String(), c.x.Float64s(), c.vals, 0, 0)
		if !c.x.IsContiguous() || c.x.Offset() != 0 {
			t.Errorf("FromSlice %v: not a fresh contiguous tensor", c.dt)
		}
	}
	if got := ToSlice[int32](i32); got[0] != -7 || got[1] != 8 {
		t.Errorf("ToSlice[int32] = %v", got)
	}
	if got := ToSlice[uint8](bl); got[0] != 1 || got[1] != 0 || got[2] != 1 {
		t.Errorf("ToSlice[uint8] of bool = %v", got)
	}
	if got := f32.Float32s(); got[0] != 1.5 || got[1] != -2 {
		t.Errorf("Float32s = %v", got)
	}
	if got := f64.Int64s(); !equalInts(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("Int64s = %v", got)
	}
	if got := bl.Bools(); !equalBools(got, []bool{true, false, true}) {
		t.Errorf("Bools = %v", got)
	}
	e := FromSlice([]float32{}, Shape{0, 3})
	if len(e.Float32s()) != 0 || !e.Shape().Equal(Shape{0, 3}) {
		t.Errorf("empty FromSlice: %v %v", e.Shape(), e.Float32s())
	}
	ewPanics(t, "FromSlice with a wrong count", func() { FromSlice([]float32{1, 2, 3}, Shape{2, 2}) }, "FromSlice", "3 values", "[2 2]")
	for _, x := range []*Tensor{f32, f64, i32, i64, u8, bl, conv, e} {
		x.Release()
	}
}

func TestCreation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		x     *Tensor
		dt    DType
		shape Shape
		vals  []float64
	}{
		{"Zeros", Zeros(Shape{2, 2}), Float32, Shape{2, 2}, []float64{0, 0, 0, 0}},
		{"Ones int64", Ones(Shape{3}, Of(Int64)), Int64, Shape{3}, []float64{1, 1, 1}},
		{"Full", Full(Shape{2}, 2.5, Of(Float64)), Float64, Shape{2}, []float64{2.5, 2.5}},
		{"Scalar", Scalar(-3), Float32, Shape{}, []float64{-3}},
		{"Arange", Arange(0, 5, 1), Float32, Shape{5}, []float64{0, 1, 2, 3, 4}},
		{"Arange step", Arange(1, 2, 0.25, Of(Float64)), Float64, Shape{4}, []float64{1, 1.25, 1.5, 1.75}},
		{"Arange down", Arange(3, 0, -1, Of(Int64)), Int64, Shape{3}, []float64{3, 2, 1}},
		{"Arange empty", Arange(3, 0, 1), Float32, Shape{0}, nil},
	}
	for _, c := range cases {
		ewShape(t, c.name, c.x, c.dt, c.shape)
		ewClose(t, c.name, c.x.Float64s(), c.vals, 0, 0)
		c.x.Release()
	}
	ewPanics(t, "Arange step 0", func() { Arange(0, 1, 0) }, "Arange")
	ewPanics(t, "negative extent", func() { Zeros(Shape{2, -1}) }, "negative")
	base := FromSlice([]float64{1, 2}, nil)
	defer base.Release()
	for _, x := range []*Tensor{EmptyLike(base), ZerosLike(base), FullLike(base, 7)} {
		ewShape(t, "Like", x, Float64, Shape{2})
		if x.SharesStorage(base) {
			t.Errorf("a Like tensor shares storage")
		}
		x.Release()
	}
}

func TestCast(t *testing.T) {
	t.Parallel()
	x := FromSlice([]float64{-2.5, -0.5, 0, 0.5, 1.9, 300, math.NaN()}, nil)
	defer x.Release()
	cases := []struct {
		dt   DType
		want []float64
	}{
		{Int32, []float64{-2, 0, 0, 0, 1, 300}},
		{Int64, []float64{-2, 0, 0, 0, 1, 300}},
		{Bool, []float64{1, 1, 0, 1, 1, 1, 1}},
		{Float16, []float64{-2.5, -0.5, 0, 0.5, 1.900390625, 300, math.NaN()}},
		{BFloat16, []float64{-2.5, -0.5, 0, 0.5, 1.8984375, 300, math.NaN()}},
		{Float32, []float64{-2.5, -0.5, 0, 0.5, float64(float32(1.9)), 300, math.NaN()}},
	}
	for _, c := range cases {
		src := x
		if len(c.want) < x.NumElements() {
			src = x.Slice(0, 0, len(c.want))
			defer src.Release()
		}
		y := src.Cast(c.dt)
		ewShape(t, "Cast", y, c.dt, Shape{len(c.want)})
		ewClose(t, "Cast to "+c.dt.String(), y.Float64s(), c.want, 0, 0)
		y.Release()
	}
	c := x.Clone()
	defer c.Release()
	if c.SharesStorage(x) {
		t.Errorf("Clone shares storage")
	}
}

func TestReshapeView(t *testing.T) {
	t.Parallel()
	x := FromSlice(iota64(24), Shape{2, 3, 4})
	defer x.Release()
	cases := []struct {
		shape []int
		want  Shape
	}{
		{[]int{6, 4}, Shape{6, 4}},
		{[]int{-1}, Shape{24}},
		{[]int{2, -1, 2}, Shape{2, 6, 2}},
		{[]int{1, 24, 1}, Shape{1, 24, 1}},
		{[]int{4, 3, 2}, Shape{4, 3, 2}},
	}
	for _, c := range cases {
		for _, view := range []bool{false, true} {
			var y *Tensor
			if view {
				y = x.View(c.shape...)
			} else {
				y = x.Reshape(c.shape...)
			}
			ewShape(t, "Reshape", y, Float64, c.want)
			if !y.SharesStorage(x) {
				t.Errorf("Reshape%v of a contiguous tensor copied", c.shape)
			}
			ewClose(t, "Reshape values", y.Float64s(), iota64(24), 0, 0)
			y.Release()
		}
	}
	// A transposed tensor can be viewed only where the merged axes stay
	// contiguous.
	xt := x.Transpose(1, 2) // [2 4 3], strides [12 1 4]
	defer xt.Release()
	ewPanics(t, "View of a transposed tensor", func() { xt.View(2, 12) }, "View", "Reshape")
	r := xt.Reshape(2, 12)
	defer r.Release()
	if r.SharesStorage(x) || !r.IsContiguous() {
		t.Errorf("Reshape of a non-viewable tensor did not copy")
	}
	want := make([]float64, 24)
	for b := range 2 {
		for i := range 4 {
			for j := range 3 {
				want[b*12+i*3+j] = float64(b*12 + j*4 + i)
			}
		}
	}
	ewClose(t, "Reshape copy values", r.Float64s(), want, 0, 0)
	// Splitting the batch axis of the transposed tensor is a view.
	v := xt.View(1, 2, 4, 3)
	defer v.Release()
	if !v.SharesStorage(x) {
		t.Errorf("View that splits only a contiguous axis copied")
	}
	ewClose(t, "View of transposed values", v.Float64s(), want, 0, 0)
	f := x.Flatten(1, 2)
	defer f.Release()
	ewShape(t, "Flatten", f, Float64, Shape{2, 12})
	ewPanics(t, "Reshape to a wrong size", func() { x.Reshape(5, 5) }, "Reshape", "[5 5]")
	ewPanics(t, "two -1s", func() { x.Reshape(-1, -1) }, "Reshape")
}

func TestSliceSelectPermute(t *testing.T) {
	t.Parallel()
	x := FromSlice(iota64(12), Shape{3, 4}) // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
	defer x.Release()
	cases := []struct {
		name  string
		y     *Tensor
		shape Shape
		vals  []float64
	}{
		{"Slice", x.Slice(1, 1, 3), Shape{3, 2}, []float64{1, 2, 5, 6, 9, 10}},
		{"Slice negative", x.Slice(0, -2, 100), Shape{2, 4}, []float64{4, 5, 6, 7, 8, 9, 10, 11}},
		{"Slice empty", x.Slice(1, 3, 1), Shape{3, 0}, nil},
		{"SliceStep", x.SliceStep(1, 0, 4, 3), Shape{3, 2}, []float64{0, 3, 4, 7, 8, 11}},
		{"SliceStep 2", x.SliceStep(0, 0, 3, 2), Shape{2, 4}, []float64{0, 1, 2, 3, 8, 9, 10, 11}},
		{"Select", x.Select(0, 1), Shape{4}, []float64{4, 5, 6, 7}},
		{"Select negative", x.Select(-1, -1), Shape{3}, []float64{3, 7, 11}},
		{"Permute", x.Permute(1, 0), Shape{4, 3}, []float64{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"T", x.T(), Shape{4, 3}, []float64{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"Transpose", x.Transpose(-1, 0), Shape{4, 3}, []float64{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
		{"Unsqueeze 0", x.Unsqueeze(0), Shape{1, 3, 4}, iota64(12)},
		{"Unsqueeze -1", x.Unsqueeze(-1), Shape{3, 4, 1}, iota64(12)},
		{"Unsqueeze 1", x.Unsqueeze(1), Shape{3, 1, 4}, iota64(12)},
	}
	for _, c := range cases {
		ewShape(t, c.name, c.y, Float64, c.shape)
		ewClose(t, c.name, c.y.Float64s(), c.vals, 0, 0)
		if !c.y.SharesStorage(x) {
			t.Errorf("%s copied", c.name)
		}
		c.y.Release()
	}
	// Views of views compose.
	s := x.Slice(1, 1, 4).Select(0, 2) // [9 10 11]
	defer s.Release()
	if s.Offset() != 9 || s.At(1) != 10 || s.At(-1) != 11 {
		t.Errorf("Select of Slice: offset %d, values %v", s.Offset(), s.Float64s())
	}
	u := x.Unsqueeze(1).Unsqueeze(0) // [1 3 1 4]
	defer u.Release()
	for _, c := range []struct {
		axes []int
		want Shape
	}{{nil, Shape{3, 4}}, {[]int{0}, Shape{3, 1, 4}}, {[]int{-2, 0}, Shape{3, 4}}} {
		q := u.Squeeze(c.axes...)
		ewShape(t, "Squeeze", q, Float64, c.want)
		ewClose(t, "Squeeze", q.Float64s(), iota64(12), 0, 0)
		q.Release()
	}
	one := Scalar(5).Unsqueeze(0)
	defer one.Release()
	sq := one.Squeeze()
	defer sq.Release()
	ewShape(t, "Squeeze to a scalar", sq, Float32, Shape{})
	ewPanics(t, "Squeeze of extent 4", func() { x.Squeeze(1) }, "Squeeze", "extent 4")
	ewPanics(t, "Select out of range", func() { x.Select(0, 3) }, "Select", "out of range")
	ewPanics(t, "Slice step 0", func() { x.SliceStep(0, 0, 3, 0) }, "Slice", "step")
	ewPanics(t, "Permute repeat", func() { x.Permute(0, 0) }, "Permute", "repeated")
	ewPanics(t, "Permute rank", func() { x.Permute(0) }, "Permute")
	ewPanics(t, "axis out of range", func() { x.Transpose(0, 2) }, "Transpose", "out of range")
	ewPanics(t, "T of 1-D", func() { s.T() }, "T", "2-D")
}

func TestBroadcastExpandContiguous(t *testing.T) {
	t.Parallel()
	x := FromSlice([]float64{1, 2, 3}, Shape{3, 1})
	defer x.Release()
	b := x.BroadcastTo(Shape{2, 3, 2})
	defer b.Release()
	ewShape(t, "BroadcastTo", b, Float64, Shape{2, 3, 2})
	if st := b.Strides(); st[0] != 0 || st[2] != 0 || st[1] != 1 {
		t.Errorf("BroadcastTo strides %v, want [0 1 0]", st)
	}
	ewClose(t, "BroadcastTo", b.Float64s(), []float64{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, 0, 0)
	e := x.Expand(2, -1, 4)
	defer e.Release()
	ewShape(t, "Expand", e, Float64, Shape{2, 3, 4})
	ewPanics(t, "Broadcast a non-1 axis", func() { x.BroadcastTo(Shape{2, 1}) }, "BroadcastTo", "[3 1]")
	ewPanics(t, "Broadcast to a lower rank", func() { x.BroadcastTo(Shape{3}) }, "BroadcastTo")
	ewPanics(t, "Expand -1 for a new axis", func() { x.Expand(-1, 3, 1) }, "Expand")

	if b.IsContiguous() {
		t.Errorf("a broadcast tensor reports contiguous")
	}
	c := b.Contiguous()
	defer c.Release()
	if c.SharesStorage(x) || !c.IsContiguous() {
		t.Errorf("Contiguous of a broadcast tensor did not copy")
	}
	ewClose(t, "Contiguous", c.Float64s(), b.Float64s(), 0, 0)
	same := x.Contiguous()
	defer same.Release()
	if !same.SharesStorage(x) {
		t.Errorf("Contiguous of a contiguous tensor copied")
	}
}

func TestAtItem(t *testing.T) {
	t.Parallel()
	x := FromSlice([]int64{1, 2, 3, 4, 5, 6}, Shape{2, 3})
	defer x.Release()
	xt := x.T()
	defer xt.Release()
	if x.At(1, 2) != 6 || x.At(-1, 0) != 4 || xt.At(2, 0) != 3 {
		t.Errorf("At: %v %v %v", x.At(1, 2), x.At(-1, 0), xt.At(2, 0))
	}
	ewPanics(t, "At out of range", func() { x.At(2, 0) }, "At", "out of range")
	ewPanics(t, "At with too few indices", func() { x.At(1) }, "At", "1 indices")
	s := x.Slice(1, 2, 3).Slice(0, 1, 2)
	defer s.Release()
	if s.Item() != 6 {
		t.Errorf("Item = %v, want 6", s.Item())
	}
	ewPanics(t, "Item of 6 elements", func() { x.Item() }, "Item", "6 elements")
}

func TestCopyFrom(t *testing.T) {
	t.Parallel()
	x := Zeros(Shape{2, 3}, Of(Float64))
	defer x.Release()
	row := FromSlice([]int32{1, 2, 3}, nil)
	defer row.Release()
	x.CopyFrom(row)
	ewClose(t, "CopyFrom broadcast and convert", x.Float64s(), []float64{1, 2, 3, 1, 2, 3}, 0, 0)
	// Overlapping source and destination in one storage.
	v := FromSlice([]float64{1, 2, 3, 4, 5}, nil)
	defer v.Release()
	dst, src := v.Slice(0, 1, 5), v.Slice(0, 0, 4)
	defer dst.Release()
	defer src.Release()
	dst.CopyFrom(src)
	ewClose(t, "CopyFrom overlapping", v.Float64s(), []float64{1, 1, 2, 3, 4}, 0, 0)
	m := FromSlice(iota64(9), Shape{3, 3})
	defer m.Release()
	mt := m.T()
	defer mt.Release()
	m.CopyFrom(mt)
	ewClose(t, "CopyFrom of its own transpose", m.Float64s(), []float64{0, 3, 6, 1, 4, 7, 2, 5, 8}, 0, 0)
	// Across devices.
	other := cpu.New()
	y := x.To(other)
	defer y.Release()
	if y.Device() != Device(other) || y.SharesStorage(x) {
		t.Errorf("To: device %s, shares storage %v", y.Device().Name(), y.SharesStorage(x))
	}
	ewClose(t, "To", y.Float64s(), x.Float64s(), 0, 0)
	z := x.To(x.Device())
	defer z.Release()
	if !z.SharesStorage(x) {
		t.Errorf("To its own device copied")
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	cases := []struct {
		x    *Tensor
		want string
	}{
		{FromSlice([]float32{1, -2.5, 3, 4}, Shape{2, 2}), "tensor([[   1, -2.5],\n        [   3,    4]], shape=[2 2], dtype=float32, device=cpu)"},
		{Scalar(0.5, Of(Float64)), "tensor(0.5, shape=[], dtype=float64, device=cpu)"},
		{FromSlice([]bool{true, false}, nil), "tensor([ true, false], shape=[2], dtype=bool, device=cpu)"},
		{FromSlice([]int64{7, -10, 3}, nil), "tensor([  7, -10,   3], shape=[3], dtype=int64, device=cpu)"},
		{Zeros(Shape{0}), "tensor([], shape=[0], dtype=float32, device=cpu)"},
		{FromSlice(iota64(8), Shape{2, 2, 2}), "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]], shape=[2 2 2], dtype=float64, device=cpu)"},
		{FromSlice(iota64(2000), nil), "tensor([   0,    1,    2, ..., 1997, 1998, 1999], shape=[2000], dtype=float64, device=cpu)"},
	}
	for _, c := range cases {
		if got := c.x.String(); got != c.want {
			t.Errorf("String:\n%s\nwant\n%s", got, c.want)
		}
		c.x.Release()
	}
	big := Zeros(Shape{40, 40})
	s := big.String()
	if lines := strings.Count(s, "\n"); lines != 6 || strings.Count(s, "...") != 7 {
		t.Errorf("elided 40×40 tensor has %d lines and %d ellipses:\n%s", lines, strings.Count(s, "..."), s)
	}
	big.Release()
	if got := big.String(); got != "tensor(released)" {
		t.Errorf("String of a released tensor = %q", got)
	}
	var nilT *Tensor
	if got := nilT.String(); got != "tensor(nil)" {
		t.Errorf("String of nil = %q", got)
	}
}

func TestReleaseSemantics(t *testing.T) {
	t.Parallel()
	x := FromSlice([]float32{1, 2, 3, 4}, nil)
	if !x.Exclusive() {
		t.Errorf("a new tensor is not exclusive")
	}
	v := x.Slice(0, 2, 4)
	r := x.Retain()
	if x.Exclusive() || x.st.refs.Load() != 3 {
		t.Errorf("refs = %d after a view and a Retain, want 3", x.st.refs.Load())
	}
	x.Release()
	x.Release() // a second Release is a no-op
	if !x.Released() || v.Released() {
		t.Errorf("Released: x %v, v %v", x.Released(), v.Released())
	}
	ewClose(t, "a view outlives its base", v.Float64s(), []float64{3, 4}, 0, 0)
	r.Release()
	if !v.Exclusive() {
		t.Errorf("the last view is not exclusive")
	}
	st := v.st
	v.Release()
	if st.buf != nil || st.refs.Load() != 0 {
		t.Errorf("storage not freed after the last release: refs %d", st.refs.Load())
	}
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"Float64s", func() { x.Float64s() }},
		{"Add", func() { x.Add(v) }},
		{"Slice", func() { x.Slice(0, 0, 1) }},
		{"Retain", func() { v.Retain() }},
		{"Device", func() { x.Device() }},
		{"Sum", func() { v.Sum() }},
		{"Exp", func() { x.Exp() }},
	} {
		ewPanics(t, c.name+" after Release", c.fn, "released")
	}
	var nilT *Tensor
	nilT.Release()
	ewPanics(t, "nil tensor", func() { nilT.Exp() }, "nil tensor")
}
