package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// refConv is the direct convolution of x [n, c, h, w] with w [o, c/g, kh, kw]
// in float64, with explicit (non-zero) parameters.
func refConv(x []float64, xs Shape, w []float64, ws Shape, p ConvParams) ([]float64, Shape) {
	n, c, h, wd := xs[0], xs[1], xs[2], xs[3]
	o, cg, kh, kw := ws[0], ws[1], ws[2], ws[3]
	oh := (h+2*p.PadH-p.DilationH*(kh-1)-1)/p.StrideH + 1
	ow := (wd+2*p.PadW-p.DilationW*(kw-1)-1)/p.StrideW + 1
	og := o / p.Groups
	y := make([]float64, n*o*oh*ow)
	for b := range n {
		for oc := range o {
			g := oc / og
			for i := range oh {
				for j := range ow {
					s := 0.0
					for ci := range cg {
						for a := range kh {
							for e := range kw {
								ih, iw := i*p.StrideH-p.PadH+a*p.DilationH, j*p.StrideW-p.PadW+e*p.DilationW
								if ih >= 0 && ih < h && iw >= 0 && iw < wd {
									s += x[((b*c+g*cg+ci)*h+ih)*wd+iw] * w[((oc*cg+ci)*kh+a)*kw+e]
								}
							}
						}
					}
					y[((b*o+oc)*oh+i)*ow+j] = s
				}
			}
		}
	}
	return y, Shape{n, o, oh, ow}
}

func TestConv2d(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	full := func(sh, sw, ph, pw, dh, dw, g int) ConvParams {
		return ConvParams{StrideH: sh, StrideW: sw, PadH: ph, PadW: pw, DilationH: dh, DilationW: dw, Groups: g}
	}
	cases := []struct {
		x, w      Shape
		p, refP   ConvParams
		permuteIn bool
	}{
		// Zero fields mean stride, dilation and groups 1.
		{Shape{2, 3, 6, 5}, Shape{4, 3, 3, 3}, ConvParams{PadH: 1, PadW: 1}, full(1, 1, 1, 1, 1, 1, 1), false},
		{Shape{1, 4, 7, 7}, Shape{6, 2, 3, 2}, full(2, 1, 1, 0, 1, 2, 2), full(2, 1, 1, 0, 1, 2, 2), false},
		{Shape{2, 3, 5, 5}, Shape{3, 1, 3, 3}, ConvParams{Groups: 3, PadH: 1, PadW: 1}, full(1, 1, 1, 1, 1, 1, 3), true},
	}
	for _, dt := range []DType{Float32, Float64} {
		for _, c := range cases {
			name := fmt.Sprintf("%v x%v w%v %+v", dt, c.x, c.w, c.p)
			x, xv := randTensor(rng, dt, c.x)
			w, wv := randTensor(rng, dt, c.w)
			xin := x.Retain()
			if c.permuteIn {
				// A non-contiguous input holding the same values.
				xp := x.Permute(0, 2, 3, 1).Contiguous()
				xin.Release()
				xin = xp.Permute(0, 3, 1, 2)
				xp.Release()
				if xin.IsContiguous() {
					t.Fatalf("%s: permuted input is contiguous", name)
				}
			}
			y := Conv2d(xin, w, c.p)
			want, ys := refConv(xv, c.x, wv, c.w, c.refP)
			if !y.Shape().Equal(ys) {
				t.Errorf("%s: shape %v, want %v", name, y.Shape(), ys)
			} else {
				closeTo(t, name, y.Float64s(), want, tolOf(dt)*32)
			}

			// The gradients, by their definition as adjoints: for any dy,
			// <dy, conv(x, w)> = <dx(dy), x> = <dw(dy), w>.
			dy, dyv := randTensor(rng, dt, ys)
			dx := Conv2dBackwardData(dy, w, c.x, c.p)
			dw := Conv2dBackwardWeight(xin, dy, c.w, c.p)
			if !dx.Shape().Equal(c.x) || !dw.Shape().Equal(c.w) {
				t.Fatalf("%s: gradient shapes %v, %v", name, dx.Shape(), dw.Shape())
			}
			lhs := dot(dyv, want)
			if r := dot(dx.Float64s(), xv); !near(r, lhs, tolOf(dt)*64) {
				t.Errorf("%s: <dx, x> = %v, want <dy, y> = %v", name, r, lhs)
			}
			if r := dot(dw.Float64s(), wv); !near(r, lhs, tolOf(dt)*64) {
				t.Errorf("%s: <dw, w> = %v, want <dy, y> = %v", name, r, lhs)
			}
			for _, u := range []*Tensor{x, xin, w, y, dy, dx, dw} {
				u.Release()
			}
		}
	}
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func near(a, b, tol float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	m := b
	if m < 0 {
		m = -m
	}
	return d <= tol*(1+m)
}

func TestConv2dPanics(t *testing.T) {
	t.Parallel()
	z := func(s ...int) *Tensor { return Zeros(Shape(s)) }
	cases := []struct {
		name  string
		fn    func()
		parts []string
	}{
		{"channels", func() { Conv2d(z(1, 3, 5, 5), z(4, 2, 3, 3), ConvParams{}) }, []string{"Conv2d", "[1 3 5 5]", "[4 2 3 3]", "3 channels"}},
		{"groups", func() { Conv2d(z(1, 4, 5, 5), z(3, 2, 3, 3), ConvParams{Groups: 2}) }, []string{"Conv2d", "groups 2", "divide"}},
		{"rank", func() { Conv2d(z(3, 5, 5), z(4, 3, 3, 3), ConvParams{}) }, []string{"Conv2d", "[3 5 5]", "4-D", "unsqueeze"}},
		{"kernel too big", func() { Conv2d(z(1, 1, 2, 2), z(1, 1, 3, 3), ConvParams{}) }, []string{"Conv2d", "does not fit", "pad"}},
		{"negative pad", func() { Conv2d(z(1, 1, 2, 2), z(1, 1, 1, 1), ConvParams{PadH: -1}) }, []string{"Conv2d", "padding"}},
		{"dy shape", func() { Conv2dBackwardData(z(1, 4, 4, 4), z(4, 3, 3, 3), Shape{1, 3, 5, 5}, ConvParams{}) }, []string{"Conv2dBackwardData", "[1 4 4 4]", "[1 4 3 3]"}},
		{"dw dy shape", func() { Conv2dBackwardWeight(z(1, 3, 5, 5), z(1, 4, 4, 4), Shape{4, 3, 3, 3}, ConvParams{}) }, []string{"Conv2dBackwardWeight", "[1 4 4 4]"}},
		{"dtype", func() { Conv2d(z(1, 1, 3, 3), Zeros(Shape{1, 1, 1, 1}, Of(Float64)), ConvParams{}) }, []string{"Conv2d", "dtypes"}},
	}
	for _, c := range cases {
		mustPanic(t, c.name, c.fn, c.parts...)
	}
}
