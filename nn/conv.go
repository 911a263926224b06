package nn

import (
	"fmt"
	"math"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Conv2dOptions are the settings of a Conv2d beyond its channels and kernel
// size. Zero values mean PyTorch's defaults: stride 1, no padding,
// dilation 1, one group, with bias.
type Conv2dOptions struct {
	Stride, Padding, Dilation, Groups int
	// NoBias leaves out the bias (PyTorch's bias=False).
	NoBias bool
}

// Conv2d is a 2-D convolution (cross-correlation) of x [N, In, H, W] with
// parameters "weight" [Out, In/Groups, K, K] and "bias" [Out]:
// y[n, o] = b[o] + Σ_{c, i, j} W[o, c, i, j]·x[n, g·In/Groups + c, s·h + d·i − p, s·w + d·j − p]
// for the group g of output channel o.
type Conv2d struct {
	Base
	In, Out, Kernel int
	Params          tensor.ConvParams
	Weight          *autograd.Var
	Bias            *autograd.Var // nil without bias
}

// NewConv2d returns a Conv2d with a kernel×kernel window, initialised as
// PyTorch's nn.Conv2d: the weight by KaimingUniform with a = √5
// (U(−1/√fanIn, 1/√fanIn), fanIn = In/Groups·K²) and the bias from the same
// range, drawn from g. opts choose the parameters' dtype and device.
func NewConv2d(in, out, kernel int, opt Conv2dOptions, g *tensor.Generator, opts ...tensor.Option) *Conv2d {
	p := tensor.ConvParams{
		StrideH: orDefault(opt.Stride, 1), StrideW: orDefault(opt.Stride, 1),
		PadH: opt.Padding, PadW: opt.Padding,
		DilationH: orDefault(opt.Dilation, 1), DilationW: orDefault(opt.Dilation, 1),
		Groups: orDefault(opt.Groups, 1),
	}
	if in <= 0 || out <= 0 || kernel <= 0 || opt.Padding < 0 || p.StrideH < 0 || p.DilationH < 0 || p.Groups < 0 || in%p.Groups != 0 || out%p.Groups != 0 {
		panic(fmt.Sprintf("nn: NewConv2d(%d, %d, %d, %+v): sizes must be positive and channels divisible by groups", in, out, kernel, opt))
	}
	c := &Conv2d{In: in, Out: out, Kernel: kernel, Params: p}
	w := tensor.Empty(tensor.Shape{out, in / p.Groups, kernel, kernel}, opts...)
	KaimingUniform(w, math.Sqrt(5), FanIn, "leaky_relu", g)
	c.Weight = c.RegisterParameter("weight", autograd.Param(w))
	if !opt.NoBias {
		fanIn, _ := Fans(w.Shape())
		b := tensor.Empty(tensor.Shape{out}, opts...)
		Uniform(b, -biasBound(fanIn), biasBound(fanIn), g)
		c.Bias = c.RegisterParameter("bias", autograd.Param(b))
	}
	return c
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Forward convolves x [N, In, H, W] into [N, Out, H', W'].
func (c *Conv2d) Forward(x *autograd.Var) *autograd.Var {
	if x.Value.Dim() != 4 || x.Value.Size(1) != c.In {
		panic(fmt.Sprintf("nn: Conv2d(%d→%d): input of shape %v; want [N, %d, H, W]", c.In, c.Out, x.Value.Shape(), c.In))
	}
	return autograd.Conv2d(x, c.Weight, c.Bias, c.Params)
}
