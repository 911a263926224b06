package tensor

import "testing"

func TestMaxPool2d(t *testing.T) {
	t.Parallel()
	x := FromSlice([]float64{
		1, 2, 3, 4,
		8, 7, 6, 5,
		9, 1, 1, 9,
		0, 3, 2, 1,
	}, Shape{1, 1, 4, 4})
	defer x.Release()
	// KernelH/W only: the stride defaults to the kernel, the dilation to 1.
	p := PoolParams{KernelH: 2, KernelW: 2}
	y, idx := MaxPool2d(x, p)
	defer y.Release()
	defer idx.Release()
	if !y.Shape().Equal(Shape{1, 1, 2, 2}) || idx.DType() != Int64 {
		t.Fatalf("y %v, indices %v %v", y.Shape(), idx.DType(), idx.Shape())
	}
	closeTo(t, "y", y.Float64s(), []float64{8, 6, 9, 9}, 0)
	gotIdx := idx.Int64s()
	for i, w := range []int64{4, 6, 8, 11} {
		if gotIdx[i] != w {
			t.Errorf("indices %v, want [4 6 8 11]", gotIdx)
			break
		}
	}
	dy := FromSlice([]float64{1, 2, 3, 4}, Shape{1, 1, 2, 2})
	defer dy.Release()
	dx := MaxPool2dBackward(dy, idx, x.Shape(), p)
	defer dx.Release()
	closeTo(t, "dx", dx.Float64s(), []float64{
		0, 0, 0, 0,
		1, 0, 2, 0,
		3, 0, 0, 4,
		0, 0, 0, 0,
	}, 0)
}

func TestAvgPool2d(t *testing.T) {
	t.Parallel()
	x := FromSlice([]float32{
		1, 2, 3,
		4, 5, 6,
		7, 8, 9,
	}, Shape{1, 1, 3, 3})
	defer x.Release()
	cases := []struct {
		p      PoolParams
		y, dx  []float64
		shape  Shape
		remark string
	}{
		{
			p:     PoolParams{KernelH: 2, KernelW: 2, StrideH: 1, StrideW: 1},
			shape: Shape{1, 1, 2, 2}, y: []float64{3, 4, 6, 7},
			dx:     []float64{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25},
			remark: "overlapping windows",
		},
		{
			// ceil mode: the second window covers one row and column of
			// the input; without count_include_pad it averages only those.
			p:     PoolParams{KernelH: 2, KernelW: 2, CeilMode: true},
			shape: Shape{1, 1, 2, 2}, y: []float64{3, 4.5, 7.5, 9},
			dx:     []float64{0.25, 0.25, 0.5, 0.25, 0.25, 0.5, 0.5, 0.5, 1},
			remark: "ceil mode",
		},
		{
			// pad 1 with count_include_pad: every 2×2 window divides by 4.
			p:     PoolParams{KernelH: 2, KernelW: 2, PadH: 1, PadW: 1, CountIncludePad: true},
			shape: Shape{1, 1, 2, 2}, y: []float64{0.25, 1.25, 2.75, 7},
			dx:     []float64{0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25},
			remark: "count_include_pad",
		},
	}
	for _, c := range cases {
		y := AvgPool2d(x, c.p)
		if !y.Shape().Equal(c.shape) {
			t.Errorf("%s: shape %v, want %v", c.remark, y.Shape(), c.shape)
			y.Release()
			continue
		}
		closeTo(t, c.remark, y.Float64s(), c.y, 1e-6)
		dy := Ones(c.shape)
		dx := AvgPool2dBackward(dy, x.Shape(), c.p)
		closeTo(t, c.remark+" backward", dx.Float64s(), c.dx, 1e-6)
		for _, u := range []*Tensor{y, dy, dx} {
			u.Release()
		}
	}
}

func TestPoolPanics(t *testing.T) {
	t.Parallel()
	x := Zeros(Shape{1, 1, 4, 4})
	defer x.Release()
	cases := []struct {
		name  string
		fn    func()
		parts []string
	}{
		{"pad", func() { AvgPool2d(x, PoolParams{KernelH: 2, KernelW: 2, PadH: 2}) }, []string{"AvgPool2d", "padding", "half"}},
		{"dilated avg", func() { AvgPool2d(x, PoolParams{KernelH: 2, KernelW: 2, DilationH: 2}) }, []string{"AvgPool2d", "dilation"}},
		{"too big", func() { MaxPool2d(x, PoolParams{KernelH: 5, KernelW: 5}) }, []string{"MaxPool2d", "does not fit", "[1 1 4 4]"}},
		{"rank", func() { MaxPool2d(Zeros(Shape{4, 4}), PoolParams{KernelH: 2, KernelW: 2}) }, []string{"MaxPool2d", "[4 4]", "4-D"}},
		{"int input", func() { AvgPool2d(Zeros(Shape{1, 1, 4, 4}, Of(Int64)), PoolParams{KernelH: 2, KernelW: 2}) }, []string{"AvgPool2d", "float"}},
		{"dy shape", func() {
			AvgPool2dBackward(Zeros(Shape{1, 1, 3, 3}), Shape{1, 1, 4, 4}, PoolParams{KernelH: 2, KernelW: 2})
		}, []string{"AvgPool2dBackward", "[1 1 3 3]", "[1 1 2 2]"}},
	}
	for _, c := range cases {
		mustPanic(t, c.name, c.fn, c.parts...)
	}
}
