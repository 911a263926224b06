package tensor

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// ConvParams are the settings of a 2-D convolution. Zero strides, dilations
// and groups mean 1, PyTorch's defaults.
type ConvParams = backend.ConvParams

// normConv replaces zero-valued fields by their defaults.
func normConv(p ConvParams) ConvParams {
	one := func(v *int) {
		if *v == 0 {
			*v = 1
		}
	}
	one(&p.StrideH)
	one(&p.StrideW)
	one(&p.DilationH)
	one(&p.DilationW)
	one(&p.Groups)
	return p
}

// convOutShape checks a convolution of an input of xShape with a weight of
// wShape and returns the output's shape [N, O, OH, OW].
func convOutShape(op string, xShape, wShape Shape, p ConvParams) Shape {
	if len(xShape) != 4 || len(wShape) != 4 {
		panic(fmt.Sprintf("tensor: %s: x %v and w %v must be 4-D: x [N, C, H, W], w [O, C/groups, KH, KW] (unsqueeze a single image to N = 1)", op, xShape, wShape))
	}
	if p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 || p.Groups < 1 || p.PadH < 0 || p.PadW < 0 {
		panic(fmt.Sprintf("tensor: %s: invalid %+v: strides, dilations and groups must be positive and padding non-negative", op, p))
	}
	c, o, g := xShape[1], wShape[0], p.Groups
	if c%g != 0 || o%g != 0 {
		panic(fmt.Sprintf("tensor: %s: groups %d must divide both the %d input channels of x %v and the %d output channels of w %v", op, g, c, xShape, o, wShape))
	}
	if wShape[1] != c/g {
		panic(fmt.Sprintf("tensor: %s: x %v has %d channels, so w %v needs %d/groups = %d input channels per group, not %d",
			op, xShape, c, wShape, c, c/g, wShape[1]))
	}
	oh, ow := p.OutputSize(xShape[2], xShape[3], wShape[2], wShape[3])
	// The kernel must fit: ⌊·⌋ of a negative numerator in OutputSize
	// truncates toward zero instead.
	fits := xShape[2]+2*p.PadH >= p.DilationH*(wShape[2]-1)+1 && xShape[3]+2*p.PadW >= p.DilationW*(wShape[3]-1)+1
	if oh < 1 || ow < 1 || wShape[2] < 1 || wShape[3] < 1 || !fits {
		panic(fmt.Sprintf("tensor: %s: the %d×%d kernel of w %v (dilation %d×%d) does not fit x %v padded by %d×%d; pad more or use a smaller kernel",
			op, wShape[2], wShape[3], wShape, p.DilationH, p.DilationW, xShape, p.PadH, p.PadW))
	}
	return Shape{xShape[0], o, oh, ow}
}

// Conv2d returns the 2-D cross-correlation of x [N, C, H, W] with w
// [O, C/groups, KH, KW] (no bias), [N, O, OH, OW] with
// OH = ⌊(H + 2·PadH − DilationH·(KH − 1) − 1)/StrideH⌋ + 1 (likewise OW):
//
//	y[n, o, i, j] = Σ_{c, a, b} x[n, g·C/groups + c, i·sh − ph + a·dh, j·sw − pw + b·dw] · w[o, c, a, b]
//
// with g = ⌊o/(O/groups)⌋ and x zero outside its plane.
func Conv2d(x, w *Tensor, p ConvParams) *Tensor {
	const op = "Conv2d"
	matmulChecks(op, x, w)
	p = normConv(p)
	ys := convOutShape(op, x.shape, w.shape, p)
	xc, wc := x.Contiguous(), w.Contiguous()
	defer xc.Release()
	defer wc.Release()
	y := empty(x.Device(), x.dtype, ys)
	must(op, x.Device().Conv2d(y.Raw(), xc.Raw(), wc.Raw(), p), x, w)
	addFLOPs(convMACs(ys, w.shape))
	return y
}

// Conv2dBackwardData returns ∂L/∂x [xShape] of Conv2d(x, w, p) given
// dy = ∂L/∂y: the transposed convolution of dy with w.
func Conv2dBackwardData(dy, w *Tensor, xShape Shape, p ConvParams) *Tensor {
	const op = "Conv2dBackwardData"
	matmulChecks(op, dy, w)
	p = normConv(p)
	checkConvGrad(op, dy.shape, xShape, w.shape, p)
	dyc, wc := dy.Contiguous(), w.Contiguous()
	defer dyc.Release()
	defer wc.Release()
	dx := empty(dy.Device(), dy.dtype, xShape)
	must(op, dy.Device().Conv2dBackwardData(dx.Raw(), dyc.Raw(), wc.Raw(), p), dy, w)
	addFLOPs(convMACs(dy.shape, w.shape))
	return dx
}

// Conv2dBackwardWeight returns ∂L/∂w [wShape] of Conv2d(x, w, p) given
// dy = ∂L/∂y: the correlation of x with dy, summed over the batch.
func Conv2dBackwardWeight(x, dy *Tensor, wShape Shape, p ConvParams) *Tensor {
	const op = "Conv2dBackwardWeight"
	matmulChecks(op, x, dy)
	p = normConv(p)
	checkConvGrad(op, dy.shape, x.shape, wShape, p)
	xc, dyc := x.Contiguous(), dy.Contiguous()
	defer xc.Release()
	defer dyc.Release()
	dw := empty(x.Device(), x.dtype, wShape)
	must(op, x.Device().Conv2dBackwardWeight(dw.Raw(), xc.Raw(), dyc.Raw(), p), x, dy)
	addFLOPs(convMACs(dy.shape, wShape))
	return dw
}

// checkConvGrad panics unless dy has the output shape of a convolution of
// an x of xShape with a w of wShape.
func checkConvGrad(op string, dy, xShape, wShape Shape, p ConvParams) {
	if ys := convOutShape(op, xShape, wShape, p); !ys.Equal(dy) {
		panic(fmt.Sprintf("tensor: %s: dy %v does not match the output %v of a convolution of x %v with w %v", op, dy, ys, xShape, wShape))
	}
}
