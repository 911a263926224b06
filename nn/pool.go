package nn

import (
	"fmt"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// PoolOptions are the settings of MaxPool2d and AvgPool2d beyond the
// window size. Zero values mean PyTorch's defaults: stride equal to the
// window, no padding, dilation 1, floor rounding, and padding counted in
// averages.
type PoolOptions struct {
	Stride, Padding, Dilation int
	// CeilMode rounds the output size up (ceil_mode=True).
	CeilMode bool
	// ExcludePad leaves padded positions out of the average's divisor
	// (count_include_pad=False).
	ExcludePad bool
}

func (o PoolOptions) params(kernel int, avg bool) tensor.PoolParams {
	if kernel <= 0 || o.Stride < 0 || o.Padding < 0 || o.Dilation < 0 || 2*o.Padding > kernel {
		panic(fmt.Sprintf("nn: pooling with window %d and %+v: sizes must be positive and padding at most half the window", kernel, o))
	}
	if avg && o.Dilation > 1 {
		panic("nn: AvgPool2d has no dilation")
	}
	s, d := orDefault(o.Stride, kernel), orDefault(o.Dilation, 1)
	return tensor.PoolParams{
		KernelH: kernel, KernelW: kernel,
		StrideH: s, StrideW: s,
		PadH: o.Padding, PadW: o.Padding,
		DilationH: d, DilationW: d,
		CeilMode:        o.CeilMode,
		CountIncludePad: !o.ExcludePad,
	}
}

// MaxPool2d takes the maximum over each window of x [N, C, H, W]. It has
// no parameters.
type MaxPool2d struct {
	Base
	Params tensor.PoolParams
}

// NewMaxPool2d returns a MaxPool2d with a kernel×kernel window.
func NewMaxPool2d(kernel int, opt PoolOptions) *MaxPool2d {
	return &MaxPool2d{Params: opt.params(kernel, false)}
}

// Forward pools x [N, C, H, W].
func (l *MaxPool2d) Forward(x *autograd.Var) *autograd.Var {
	check4D("MaxPool2d", x)
	return autograd.MaxPool2d(x, l.Params)
}

// AvgPool2d averages each window of x [N, C, H, W]. It has no parameters.
type AvgPool2d struct {
	Base
	Params tensor.PoolParams
}

// NewAvgPool2d returns an AvgPool2d with a kernel×kernel window.
func NewAvgPool2d(kernel int, opt PoolOptions) *AvgPool2d {
	return &AvgPool2d{Params: opt.params(kernel, true)}
}

// Forward pools x [N, C, H, W].
func (l *AvgPool2d) Forward(x *autograd.Var) *autograd.Var {
	check4D("AvgPool2d", x)
	return autograd.AvgPool2d(x, l.Params)
}

// AdaptiveAvgPool2d averages x [N, C, H, W] over an OutH×OutW grid of
// windows: output row i covers input rows ⌊i·H/OutH⌋ … ⌈(i+1)·H/OutH⌉ − 1,
// and likewise for columns, as PyTorch's nn.AdaptiveAvgPool2d. It has no
// parameters.
type AdaptiveAvgPool2d struct {
	Base
	OutH, OutW int
}

// NewAdaptiveAvgPool2d returns an AdaptiveAvgPool2d with an h×w output;
// NewAdaptiveAvgPool2d(1, 1) is global average pooling.
func NewAdaptiveAvgPool2d(h, w int) *AdaptiveAvgPool2d {
	if h <= 0 || w <= 0 {
		panic(fmt.Sprintf("nn: NewAdaptiveAvgPool2d(%d, %d): sizes must be positive", h, w))
	}
	return &AdaptiveAvgPool2d{OutH: h, OutW: w}
}

// Forward pools x [N, C, H, W] into [N, C, OutH, OutW].
func (l *AdaptiveAvgPool2d) Forward(x *autograd.Var) *autograd.Var {
	check4D("AdaptiveAvgPool2d", x)
	h, w := x.Value.Size(2), x.Value.Size(3)
	switch {
	case l.OutH == 1 && l.OutW == 1:
		return autograd.MeanKeepDim(x, 2, 3)
	case h%l.OutH == 0 && w%l.OutW == 0:
		kh, kw := h/l.OutH, w/l.OutW
		return autograd.AvgPool2d(x, tensor.PoolParams{
			KernelH: kh, KernelW: kw, StrideH: kh, StrideW: kw,
			DilationH: 1, DilationW: 1, CountIncludePad: true,
		})
	}
	// A window's mean is the mean over its columns of the means over its
	// rows, so the two axes are pooled one after the other.
	rows := adaptiveMean(x, 2, l.OutH)
	defer rows.Release()
	return adaptiveMean(rows, 3, l.OutW)
}

// adaptiveMean averages x along axis over out adaptive windows.
func adaptiveMean(x *autograd.Var, axis, out int) *autograd.Var {
	n := x.Value.Size(axis)
	parts := make([]*autograd.Var, out)
	for i := range parts {
		lo, hi := i*n/out, ((i+1)*n+out-1)/out
		s := autograd.Slice(x, axis, lo, hi)
		parts[i] = autograd.MeanKeepDim(s, axis)
		s.Release()
	}
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	return autograd.Concat(axis, parts...)
}

func check4D(op string, x *autograd.Var) {
	if x.Value.Dim() != 4 {
		panic(fmt.Sprintf("nn: %s: input of shape %v; want [N, C, H, W]", op, x.Value.Shape()))
	}
}
