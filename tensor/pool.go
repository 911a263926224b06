package tensor

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// PoolParams are the settings of 2-D pooling, with PyTorch's meaning. Zero
// strides mean the kernel size and zero dilations mean 1, PyTorch's
// defaults.
type PoolParams = backend.PoolParams

// normPool replaces zero-valued fields by their defaults.
func normPool(p PoolParams) PoolParams {
	if p.StrideH == 0 {
		p.StrideH = p.KernelH
	}
	if p.StrideW == 0 {
		p.StrideW = p.KernelW
	}
	if p.DilationH == 0 {
		p.DilationH = 1
	}
	if p.DilationW == 0 {
		p.DilationW = 1
	}
	return p
}

// poolOutShape checks pooling of an input of xShape and returns the
// output's shape [N, C, OH, OW].
func poolOutShape(op string, xShape Shape, p PoolParams, avg bool) Shape {
	if len(xShape) != 4 {
		panic(fmt.Sprintf("tensor: %s: x %v must be 4-D [N, C, H, W] (unsqueeze a single image to N = 1)", op, xShape))
	}
	if p.KernelH < 1 || p.KernelW < 1 || p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 || p.PadH < 0 || p.PadW < 0 {
		panic(fmt.Sprintf("tensor: %s: invalid %+v: kernel, stride and dilation must be positive and padding non-negative", op, p))
	}
	if avg && (p.DilationH != 1 || p.DilationW != 1) {
		panic(fmt.Sprintf("tensor: %s: average pooling has no dilation, got %d×%d; leave it 0 or 1", op, p.DilationH, p.DilationW))
	}
	if p.PadH > p.KernelH/2 || p.PadW > p.KernelW/2 {
		panic(fmt.Sprintf("tensor: %s: padding %d×%d exceeds half the %d×%d kernel; pad at most %d×%d",
			op, p.PadH, p.PadW, p.KernelH, p.KernelW, p.KernelH/2, p.KernelW/2))
	}
	oh, ow := p.OutputSize(xShape[2], xShape[3])
	fits := xShape[2]+2*p.PadH >= p.DilationH*(p.KernelH-1)+1 && xShape[3]+2*p.PadW >= p.DilationW*(p.KernelW-1)+1
	if oh < 1 || ow < 1 || !fits {
		panic(fmt.Sprintf("tensor: %s: the %d×%d window (dilation %d×%d) does not fit x %v padded by %d×%d; use a smaller kernel or more padding",
			op, p.KernelH, p.KernelW, p.DilationH, p.DilationW, xShape, p.PadH, p.PadW))
	}
	return Shape{xShape[0], xShape[1], oh, ow}
}

// MaxPool2d returns the maximum of each window of x [N, C, H, W] and, as
// Int64, the flat position h·W + w of that maximum within its plane
// (torch.nn.functional.max_pool2d with return_indices). Padding acts as −∞,
// the first maximum wins ties, and NaN propagates.
func MaxPool2d(x *Tensor, p PoolParams) (y, indices *Tensor) {
	const op = "MaxPool2d"
	floatOnly(op, x)
	p = normPool(p)
	ys := poolOutShape(op, x.shape, p, false)
	xc := x.Contiguous()
	defer xc.Release()
	y = empty(x.Device(), x.dtype, ys)
	indices = empty(x.Device(), Int64, ys)
	must(op, x.Device().Pool2d(backend.MaxPool, y.Raw(), indices.Raw(), xc.Raw(), p), x)
	return y, indices
}

// MaxPool2dBackward returns ∂L/∂x [xShape] of MaxPool2d given dy and the
// indices it returned: each dy is added at the position its index names.
func MaxPool2dBackward(dy, indices *Tensor, xShape Shape, p PoolParams) *Tensor {
	const op = "MaxPool2dBackward"
	floatOnly(op, dy)
	sameDevice(op, dy, indices)
	p = normPool(p)
	ys := poolOutShape(op, xShape, p, false)
	if !dy.shape.Equal(ys) || !indices.shape.Equal(ys) || indices.dtype != Int64 {
		panic(fmt.Sprintf("tensor: %s: dy %v and indices %v must both be the %v output of pooling x %v, indices int64 (got %v)",
			op, dy.shape, indices.shape, ys, xShape, indices.dtype))
	}
	dyc, ic := dy.Contiguous(), indices.Contiguous()
	defer dyc.Release()
	defer ic.Release()
	dx := empty(dy.Device(), dy.dtype, xShape)
	must(op, dy.Device().Pool2dBackward(backend.MaxPool, dx.Raw(), dyc.Raw(), ic.Raw(), p), dy, indices)
	return dx
}

// AvgPool2d returns the mean of each window of x [N, C, H, W]
// (torch.nn.functional.avg_pool2d): the window's sum over the input divided
// by its size clipped to the padded input when CountIncludePad, else by the
// number of its positions inside the input.
func AvgPool2d(x *Tensor, p PoolParams) *Tensor {
	const op = "AvgPool2d"
	floatOnly(op, x)
	p = normPool(p)
	ys := poolOutShape(op, x.shape, p, true)
	xc := x.Contiguous()
	defer xc.Release()
	y := empty(x.Device(), x.dtype, ys)
	must(op, x.Device().Pool2d(backend.AvgPool, y.Raw(), backend.View{}, xc.Raw(), p), x)
	return y
}

// AvgPool2dBackward returns ∂L/∂x [xShape] of AvgPool2d given dy: each dy,
// divided by its window's divisor, is added over the window.
func AvgPool2dBackward(dy *Tensor, xShape Shape, p PoolParams) *Tensor {
	const op = "AvgPool2dBackward"
	floatOnly(op, dy)
	p = normPool(p)
	if ys := poolOutShape(op, xShape, p, true); !dy.shape.Equal(ys) {
		panic(fmt.Sprintf("tensor: %s: dy %v must be the %v output of pooling x %v", op, dy.shape, ys, xShape))
	}
	dyc := dy.Contiguous()
	defer dyc.Release()
	dx := empty(dy.Device(), dy.dtype, xShape)
	must(op, dy.Device().Pool2dBackward(backend.AvgPool, dx.Raw(), dyc.Raw(), backend.View{}, p), dy)
	return dx
}
