package backend

import "fmt"

// Conv2dGeometry is a validated 2-D convolution of x [N, C, H, W] with
// w [O, C/Groups, KH, KW] into y [N, O, OH, OW].
type Conv2dGeometry struct {
	N, C, H, W, O  int
	KH, KW, OH, OW int
	Groups, CG, OG int // groups, and the input and output channels of each
}

// CheckConv2d validates the operands of Conv2d, Conv2dBackwardData and
// Conv2dBackwardWeight (dtypes, ranks, strides, padding, dilation, groups
// and the weight's and the output's shapes) and returns their geometry.
// Where the operands live — contiguity, bounds of their buffers — is the
// backend's to check.
func CheckConv2d(x, w, y View, p ConvParams) (Conv2dGeometry, error) {
	var g Conv2dGeometry
	fail := func(format string, args ...any) (Conv2dGeometry, error) {
		return g, fmt.Errorf("x%v, w%v, y%v, %+v: %s", x.Shape, w.Shape, y.Shape, p, fmt.Sprintf(format, args...))
	}
	dt := x.DType
	if dt != Float32 && dt != Float64 {
		return fail("dtype %v, want float32 or float64", dt)
	}
	if w.DType != dt || y.DType != dt {
		return fail("dtypes %v, %v and %v differ", x.DType, w.DType, y.DType)
	}
	if len(x.Shape) != 4 || len(w.Shape) != 4 || len(y.Shape) != 4 {
		return fail("operands must be 4-D")
	}
	if p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 || p.PadH < 0 || p.PadW < 0 || p.Groups < 1 {
		return fail("strides, dilations and groups must be ≥ 1 and padding ≥ 0")
	}
	g = Conv2dGeometry{N: x.Shape[0], C: x.Shape[1], H: x.Shape[2], W: x.Shape[3],
		O: w.Shape[0], KH: w.Shape[2], KW: w.Shape[3], Groups: p.Groups}
	if g.C%g.Groups != 0 || g.O%g.Groups != 0 {
		return fail("groups %d do not divide %d input and %d output channels", g.Groups, g.C, g.O)
	}
	g.CG, g.OG = g.C/g.Groups, g.O/g.Groups
	if w.Shape[1] != g.CG {
		return fail("weight has %d input channels per group, want %d", w.Shape[1], g.CG)
	}
	if g.KH < 1 || g.KW < 1 {
		return fail("empty kernel")
	}
	g.OH, g.OW = p.OutputSize(g.H, g.W, g.KH, g.KW)
	if g.OH < 1 || g.OW < 1 || g.H+2*p.PadH < p.DilationH*(g.KH-1)+1 || g.W+2*p.PadW < p.DilationW*(g.KW-1)+1 {
		return fail("the dilated kernel does not fit the padded input")
	}
	if want := (Shape{g.N, g.O, g.OH, g.OW}); !y.Shape.Equal(want) {
		return fail("output shape must be %v", want)
	}
	return g, nil
}
