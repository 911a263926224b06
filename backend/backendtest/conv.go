package backendtest

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

func init() { register("Conv", checkConv) }

// convCase is a convolution of x [n, c, h, w] with w [o, c/groups, kh, kw].
type convCase struct {
	n, c, h, w, o, kh, kw int
	p                     backend.ConvParams
}

func (cc convCase) String() string {
	return fmt.Sprintf("x[%d %d %d %d]/w[%d %d %d %d]/s%d,%d/p%d,%d/d%d,%d/g%d", cc.n, cc.c, cc.h, cc.w,
		cc.o, cc.c/cc.p.Groups, cc.kh, cc.kw, cc.p.StrideH, cc.p.StrideW, cc.p.PadH, cc.p.PadW,
		cc.p.DilationH, cc.p.DilationW, cc.p.Groups)
}

// outSize is ⌊(in + 2·pad − dil·(k − 1) − 1)/stride⌋ + 1, written out here
// rather than taken from ConvParams.OutputSize.
func outSize(in, k, stride, pad, dil int) int {
	return (in+2*pad-dil*(k-1)-1)/stride + 1
}

// convTaps calls fn(xi, wi, yi) for every product x[xi]·w[wi] that
// contributes to y[yi] in the direct seven-loop convolution; xi, wi and yi
// are row-major flat indices.
func convTaps(cc convCase, fn func(xi, wi, yi int)) {
	p := cc.p
	oh, ow := outSize(cc.h, cc.kh, p.StrideH, p.PadH, p.DilationH), outSize(cc.w, cc.kw, p.StrideW, p.PadW, p.DilationW)
	cg, og := cc.c/p.Groups, cc.o/p.Groups
	for n := 0; n < cc.n; n++ {
		for o := 0; o < cc.o; o++ {
			g := o / og
			for y := 0; y < oh; y++ {
				for x := 0; x < ow; x++ {
					yi := ((n*cc.o+o)*oh+y)*ow + x
					for c := 0; c < cg; c++ {
						ci := g*cg + c
						for i := 0; i < cc.kh; i++ {
							ih := y*p.StrideH - p.PadH + i*p.DilationH
							if ih < 0 || ih >= cc.h {
								continue
							}
							for j := 0; j < cc.kw; j++ {
								iw := x*p.StrideW - p.PadW + j*p.DilationW
								if iw < 0 || iw >= cc.w {
									continue
								}
								fn(((n*cc.c+ci)*cc.h+ih)*cc.w+iw, ((o*cg+c)*cc.kh+i)*cc.kw+j, yi)
							}
						}
					}
				}
			}
		}
	}
}

func checkConv(e *Env) {
	pr := func(sh, sw, ph, pw, dh, dw, g int) backend.ConvParams {
		return backend.ConvParams{StrideH: sh, StrideW: sw, PadH: ph, PadW: pw, DilationH: dh, DilationW: dw, Groups: g}
	}
	cases := []convCase{
		{1, 1, 1, 1, 1, 1, 1, pr(1, 1, 0, 0, 1, 1, 1)},
		{2, 3, 7, 6, 4, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		{2, 4, 9, 8, 6, 3, 2, pr(2, 1, 1, 0, 1, 1, 2)},
		{2, 6, 8, 7, 6, 3, 3, pr(1, 1, 1, 1, 1, 1, 6)},
		{1, 6, 9, 9, 12, 3, 3, pr(2, 2, 1, 1, 1, 1, 6)},
		{1, 3, 10, 11, 5, 3, 3, pr(1, 1, 2, 2, 2, 2, 1)},
		{1, 2, 8, 8, 3, 2, 2, pr(3, 3, 0, 0, 1, 1, 1)},
		{2, 5, 4, 3, 7, 1, 1, pr(1, 1, 0, 0, 1, 1, 1)},
		{2, 6, 5, 3, 4, 1, 1, pr(1, 1, 0, 0, 1, 1, 2)},
		{1, 4, 7, 7, 3, 1, 1, pr(2, 2, 0, 0, 1, 1, 1)},
		{1, 2, 2, 2, 3, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		{2, 3, 5, 9, 2, 1, 5, pr(1, 2, 0, 2, 1, 1, 1)},
		{1, 3, 15, 15, 4, 7, 7, pr(2, 2, 3, 3, 1, 1, 1)},
		{0, 3, 5, 5, 4, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		{2, 16, 20, 20, 16, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		{3, 8, 13, 11, 8, 3, 3, pr(1, 2, 1, 1, 1, 2, 8)},
		{1, 40, 12, 12, 24, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		// Blocks of several samples, the last one short; a 1×1 kernel over
		// several samples; rows wider than one 16-lane vector with row
		// stride and dilation.
		{11, 2, 8, 8, 3, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		{5, 4, 4, 4, 6, 1, 1, pr(1, 1, 0, 0, 1, 1, 1)},
		{3, 3, 9, 37, 4, 3, 3, pr(2, 1, 2, 1, 2, 1, 1)},
		{2, 3, 6, 70, 4, 3, 3, pr(1, 2, 1, 1, 1, 1, 1)},
		// Same-width planes of whole 16-position vectors with enough
		// channels for the direct kernels of the CPU backend: an odd number
		// of vectors, channels not a multiple of four and output channels
		// not of fourteen; two groups with a 5×3 kernel; one vector per
		// plane; rows padded but not columns.
		{1, 18, 6, 8, 30, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		{2, 32, 8, 8, 40, 5, 3, pr(1, 1, 2, 1, 1, 1, 2)},
		{3, 16, 4, 4, 17, 3, 3, pr(1, 1, 1, 1, 1, 1, 1)},
		{2, 16, 6, 16, 16, 3, 3, pr(1, 1, 0, 1, 1, 1, 1)},
		// 1×1 kernels with 256 input channels per group, whose data
		// gradient the CPU backend computes as one product in place.
		{3, 256, 5, 6, 20, 1, 1, pr(1, 1, 0, 0, 1, 1, 1)},
		{2, 512, 3, 3, 8, 1, 1, pr(1, 1, 0, 0, 1, 1, 2)},
		// Depthwise, rows wider than a vector, two outputs per group; 5×5.
		{2, 4, 10, 20, 8, 3, 3, pr(1, 1, 1, 1, 1, 1, 4)},
		{1, 3, 7, 18, 3, 5, 5, pr(2, 1, 2, 2, 1, 1, 3)},
	}
	for _, dt := range FloatTypes {
		for _, cc := range cases {
			oh := outSize(cc.h, cc.kh, cc.p.StrideH, cc.p.PadH, cc.p.DilationH)
			ow := outSize(cc.w, cc.kw, cc.p.StrideW, cc.p.PadW, cc.p.DilationW)
			xs := backend.Shape{cc.n, cc.c, cc.h, cc.w}
			ws := backend.Shape{cc.o, cc.c / cc.p.Groups, cc.kh, cc.kw}
			ys := backend.Shape{cc.n, cc.o, oh, ow}
			x, xv := e.Random(dt, xs, false, -1, 1)
			w, wv := e.Random(dt, ws, false, -1, 1)
			dy, dyv := e.Random(dt, ys, false, -1, 1)
			taps := cc.kh * cc.kw * cc.c / cc.p.Groups
			atol := Tol(dt) * float64(taps+1)

			y := e.Alloc(dt, ys)
			want := make([]float64, ys.NumElements())
			convTaps(cc, func(xi, wi, yi int) { want[yi] += xv[xi] * wv[wi] })
			if err := e.B.Conv2d(y, x, w, cc.p); err != nil {
				e.T.Errorf("%v/%v: Conv2d: %v", dt, cc, err)
			} else {
				e.Close(fmt.Sprintf("%v/%v: Conv2d", dt, cc), e.Get(y), want, Tol(dt)*8, atol)
			}

			dx := e.Alloc(dt, xs)
			want = make([]float64, xs.NumElements())
			convTaps(cc, func(xi, wi, yi int) { want[xi] += dyv[yi] * wv[wi] })
			if err := e.B.Conv2dBackwardData(dx, dy, w, cc.p); err != nil {
				e.T.Errorf("%v/%v: Conv2dBackwardData: %v", dt, cc, err)
			} else {
				e.Close(fmt.Sprintf("%v/%v: Conv2dBackwardData", dt, cc), e.Get(dx), want, Tol(dt)*8, Tol(dt)*float64(cc.o*cc.kh*cc.kw+1))
			}

			dw := e.Alloc(dt, ws)
			want = make([]float64, ws.NumElements())
			convTaps(cc, func(xi, wi, yi int) { want[wi] += dyv[yi] * xv[xi] })
			if err := e.B.Conv2dBackwardWeight(dw, x, dy, cc.p); err != nil {
				e.T.Errorf("%v/%v: Conv2dBackwardWeight: %v", dt, cc, err)
			} else {
				e.Close(fmt.Sprintf("%v/%v: Conv2dBackwardWeight", dt, cc), e.Get(dw), want, Tol(dt)*8, Tol(dt)*float64(cc.n*oh*ow+1))
			}
		}
	}
	checkConvErrors(e)
}

func checkConvErrors(e *Env) {
	dt := backend.Float32
	f := func(s ...int) backend.View { return e.Alloc(dt, s) }
	p := backend.ConvParams{StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1}
	g2 := p
	g2.Groups = 2
	s2 := p
	s2.StrideH, s2.StrideW = 2, 2
	zero := backend.ConvParams{}
	cases := []struct {
		name    string
		y, x, w backend.View
		p       backend.ConvParams
	}{
		{"wrong output shape", f(1, 2, 4, 4), f(1, 3, 5, 5), f(2, 3, 3, 3), p},
		{"channel mismatch", f(1, 2, 3, 3), f(1, 4, 5, 5), f(2, 3, 3, 3), p},
		{"groups not dividing", f(1, 3, 3, 3), f(1, 4, 5, 5), f(3, 2, 3, 3), g2},
		{"kernel larger than input", f(1, 2, 1, 1), f(1, 3, 2, 2), f(2, 3, 3, 3), p},
		{"kernel larger than input, stride 2", f(1, 2, 1, 1), f(1, 3, 2, 2), f(2, 3, 3, 3), s2},
		{"zero stride", f(1, 2, 3, 3), f(1, 3, 5, 5), f(2, 3, 3, 3), zero},
		{"rank 3", f(2, 3, 3), f(3, 5, 5), f(2, 3, 3, 3), p},
		{"not contiguous", f(1, 2, 3, 3), e.Strided(dt, backend.Shape{1, 3, 5, 5}), f(2, 3, 3, 3), p},
	}
	for _, c := range cases {
		if err := e.B.Conv2d(c.y, c.x, c.w, c.p); err == nil {
			e.T.Errorf("Conv2d with %s: no error", c.name)
		}
		if err := e.B.Conv2dBackwardData(c.x, c.y, c.w, c.p); err == nil {
			e.T.Errorf("Conv2dBackwardData with %s: no error", c.name)
		}
		if err := e.B.Conv2dBackwardWeight(c.w, c.x, c.y, c.p); err == nil {
			e.T.Errorf("Conv2dBackwardWeight with %s: no error", c.name)
		}
	}
}
