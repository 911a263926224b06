package tensor

import "testing"

func TestCountFLOPs(t *testing.T) {
	a, b := Ones(Shape{5, 2, 3}), Ones(Shape{3, 4})
	defer a.Release()
	defer b.Release()
	x, w := Ones(Shape{2, 4, 9, 9}), Ones(Shape{6, 2, 3, 3})
	defer x.Release()
	defer w.Release()
	p := ConvParams{StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, Groups: 2}
	cases := []struct {
		name string
		f    func() *Tensor
		want int64
	}{
		{"matmul", func() *Tensor { return MatMul(a, b) }, 2 * 5 * 2 * 4 * 3},
		{"linear", func() *Tensor { return Linear(Ones(Shape{7, 3}), Ones(Shape{4, 3}), nil) }, 2 * 7 * 4 * 3},
		// y [2, 6, 5, 5], each output a sum over 2·3·3 products.
		{"conv", func() *Tensor { return Conv2d(x, w, p) }, 2 * 2 * 6 * 5 * 5 * 2 * 3 * 3},
		{"conv backward data", func() *Tensor {
			dy := Ones(Shape{2, 6, 5, 5})
			defer dy.Release()
			return Conv2dBackwardData(dy, w, x.Shape(), p)
		}, 2 * 2 * 6 * 5 * 5 * 2 * 3 * 3},
		{"conv backward weight", func() *Tensor {
			dy := Ones(Shape{2, 6, 5, 5})
			defer dy.Release()
			return Conv2dBackwardWeight(x, dy, w.Shape(), p)
		}, 2 * 2 * 6 * 5 * 5 * 2 * 3 * 3},
		{"elementwise is not counted", func() *Tensor { return a.Exp() }, 0},
	}
	for _, c := range cases {
		var out *Tensor
		got := CountFLOPs(func() { out = c.f() })
		out.Release()
		if got != c.want {
			t.Errorf("%s: CountFLOPs = %d, want %d", c.name, got, c.want)
		}
	}
	// Outside CountFLOPs nothing accumulates into the next count.
	MatMul(a, b).Release()
	if got := CountFLOPs(func() {}); got != 0 {
		t.Errorf("empty CountFLOPs = %d, want 0", got)
	}
}
