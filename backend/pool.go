package backend

import "fmt"

// Pool2dGeometry is a validated 2-D pooling of x [N, C, H, W] into
// y [N, C, OH, OW] (or, for a convolution, the geometry of its window).
type Pool2dGeometry struct {
	Planes                         int // N·C
	H, W, OH, OW                   int
	KH, KW, SH, SW, PH, PW, DH, DW int
	IncludePad                     bool
}

// CheckPool2d validates the operands of Pool2d and Pool2dBackward (dtypes,
// ranks, indices, kernel, stride, padding, dilation and the output's
// shape) and returns their geometry. Where the operands live — contiguity,
// bounds of their buffers — is the backend's to check.
func CheckPool2d(op PoolOp, x, y, indices View, p PoolParams) (Pool2dGeometry, error) {
	var g Pool2dGeometry
	fail := func(format string, args ...any) (Pool2dGeometry, error) {
		return g, fmt.Errorf("x%v, y%v, %+v: %s", x.Shape, y.Shape, p, fmt.Sprintf(format, args...))
	}
	dt := x.DType
	if dt != Float32 && dt != Float64 {
		return fail("dtype %v, want float32 or float64", dt)
	}
	if y.DType != dt {
		return fail("dtypes %v and %v differ", x.DType, y.DType)
	}
	if len(x.Shape) != 4 || len(y.Shape) != 4 {
		return fail("operands must be 4-D")
	}
	switch op {
	case MaxPool:
		if indices.IsZero() || indices.DType != Int64 || !indices.Shape.Equal(y.Shape) {
			return fail("max pooling needs int64 indices of the output's shape")
		}
	case AvgPool:
		if !indices.IsZero() {
			return fail("average pooling takes no indices")
		}
		if p.DilationH != 1 || p.DilationW != 1 {
			return fail("average pooling has no dilation (set it to 1)")
		}
	default:
		return fail("unknown pooling op %d", op)
	}
	if p.KernelH < 1 || p.KernelW < 1 || p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 {
		return fail("kernel, stride and dilation must be ≥ 1")
	}
	if p.PadH < 0 || p.PadW < 0 || p.PadH > p.KernelH/2 || p.PadW > p.KernelW/2 {
		return fail("padding must be between 0 and half the kernel")
	}
	g = Pool2dGeometry{
		Planes: x.Shape[0] * x.Shape[1], H: x.Shape[2], W: x.Shape[3],
		KH: p.KernelH, KW: p.KernelW, SH: p.StrideH, SW: p.StrideW,
		PH: p.PadH, PW: p.PadW, DH: p.DilationH, DW: p.DilationW,
		IncludePad: p.CountIncludePad,
	}
	g.OH, g.OW = p.OutputSize(g.H, g.W)
	if g.OH < 1 || g.OW < 1 || g.H+2*g.PH < g.DH*(g.KH-1)+1 || g.W+2*g.PW < g.DW*(g.KW-1)+1 {
		return fail("the window does not fit the padded input")
	}
	if want := (Shape{x.Shape[0], x.Shape[1], g.OH, g.OW}); !y.Shape.Equal(want) {
		return fail("output shape must be %v", want)
	}
	return g, nil
}
