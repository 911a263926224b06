package nn

import (
	"fmt"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// BatchNormOptions are the settings of a BatchNorm2d. Zero values mean
// PyTorch's defaults: ε = 1e-5, momentum 0.1, affine, tracking running
// statistics. (A momentum of exactly 0 can be set on the layer's field
// after construction.)
type BatchNormOptions struct {
	Eps, Momentum float64
	// NoAffine leaves out the learnable weight and bias (affine=False).
	NoAffine bool
	// NoRunningStats keeps no running statistics: batch statistics are
	// used in evaluation mode too (track_running_stats=False).
	NoRunningStats bool
	// CumulativeAverage makes the running statistics the plain average of
	// all training batches, momentum 1/num_batches_tracked
	// (momentum=None).
	CumulativeAverage bool
}

// BatchNorm2d normalises each channel of x [N, C, H, W] over N, H and W
// (Ioffe and Szegedy, 2015):
// y = (x − μ)/√(σ² + ε)·γ + β.
// In training mode μ and σ² are the batch mean and biased variance, and the
// running estimates are updated as r ← (1−m)·r + m·batch, with the unbiased
// variance; in evaluation mode the running estimates are used. Parameters
// "weight" (γ) and "bias" (β); buffers "running_mean", "running_var" and
// "num_batches_tracked" (int64, counting training batches), as PyTorch.
type BatchNorm2d struct {
	Base
	Features      int
	Eps, Momentum float64
	// CumulativeAverage replaces Momentum by 1/num_batches_tracked.
	CumulativeAverage bool
	Weight, Bias      *autograd.Var // nil without affine

	RunningMean, RunningVar *tensor.Tensor // [C]; nil without running stats
	NumBatchesTracked       *tensor.Tensor // int64 scalar; nil without running stats
}

// NewBatchNorm2d returns a BatchNorm2d over c channels with γ = 1, β = 0,
// running mean 0 and running variance 1. opts choose the dtype and device
// of the parameters and running statistics.
func NewBatchNorm2d(c int, opt BatchNormOptions, opts ...tensor.Option) *BatchNorm2d {
	if c <= 0 {
		panic(fmt.Sprintf("nn: NewBatchNorm2d(%d): the channel count must be positive", c))
	}
	bn := &BatchNorm2d{Features: c, Eps: opt.Eps, Momentum: opt.Momentum, CumulativeAverage: opt.CumulativeAverage}
	if bn.Eps == 0 {
		bn.Eps = 1e-5
	}
	if bn.Momentum == 0 {
		bn.Momentum = 0.1
	}
	if !opt.NoAffine {
		bn.Weight = bn.RegisterParameter("weight", autograd.Param(tensor.Ones(tensor.Shape{c}, opts...)))
		bn.Bias = bn.RegisterParameter("bias", autograd.Param(tensor.Zeros(tensor.Shape{c}, opts...)))
	}
	if !opt.NoRunningStats {
		bn.RunningMean = bn.RegisterBuffer("running_mean", tensor.Zeros(tensor.Shape{c}, opts...))
		bn.RunningVar = bn.RegisterBuffer("running_var", tensor.Ones(tensor.Shape{c}, opts...))
		z := tensor.Zeros(tensor.Shape{}, opts...)
		bn.NumBatchesTracked = bn.RegisterBuffer("num_batches_tracked", z.Cast(tensor.Int64))
		z.Release()
	}
	return bn
}

// Forward normalises x [N, C, H, W].
func (bn *BatchNorm2d) Forward(x *autograd.Var) *autograd.Var {
	p := bn.params("Forward", x)
	return autograd.BatchNorm(x, bn.Weight, bn.Bias, bn.RunningMean, bn.RunningVar, p)
}

// ForwardReLU returns ReLU(bn.Forward(x)) as one operation
// (autograd.BatchNormReLU), which saves passes over the activations where
// the device fuses the two.
func (bn *BatchNorm2d) ForwardReLU(x *autograd.Var) *autograd.Var {
	p := bn.params("ForwardReLU", x)
	return autograd.BatchNormReLU(x, bn.Weight, bn.Bias, bn.RunningMean, bn.RunningVar, p)
}

// params checks x, counts the batch in training and returns the settings
// of the normalisation.
func (bn *BatchNorm2d) params(op string, x *autograd.Var) tensor.NormParams {
	if x.Value.Dim() != 4 || x.Value.Size(1) != bn.Features {
		panic(fmt.Sprintf("nn: BatchNorm2d(%d).%s: input of shape %v; want [N, %d, H, W]", bn.Features, op, x.Value.Shape(), bn.Features))
	}
	p := tensor.NormParams{Eps: bn.Eps, Momentum: bn.Momentum, Training: bn.Training() || bn.RunningMean == nil}
	if bn.Training() && bn.NumBatchesTracked != nil {
		one := tensor.Ones(tensor.Shape{}, tensor.Of(tensor.Int64), tensor.On(bn.NumBatchesTracked.Device()))
		bn.NumBatchesTracked.AddInPlace(one)
		one.Release()
		if bn.CumulativeAverage {
			p.Momentum = 1 / bn.NumBatchesTracked.Item()
		}
	}
	return p
}

// LayerNormOptions are the settings of a LayerNorm. Zero values mean
// PyTorch's defaults: ε = 1e-5, with a learnable weight and bias.
type LayerNormOptions struct {
	Eps float64
	// NoAffine leaves out the weight and bias (elementwise_affine=False).
	NoAffine bool
}

// LayerNorm normalises x over its trailing axes of the given shape (Ba et
// al., 2016): y = (x − μ)/√(σ² + ε)·γ + β, with μ and σ² the mean and biased
// variance over those axes. Parameters "weight" (γ) and "bias" (β) of that
// shape.
type LayerNorm struct {
	Base
	Shape        tensor.Shape
	Eps          float64
	Weight, Bias *autograd.Var // nil without affine
}

// NewLayerNorm returns a LayerNorm over trailing axes of the given shape,
// with γ = 1 and β = 0. opts choose the dtype and device of the parameters.
func NewLayerNorm(shape tensor.Shape, opt LayerNormOptions, opts ...tensor.Option) *LayerNorm {
	if len(shape) == 0 || shape.NumElements() == 0 {
		panic(fmt.Sprintf("nn: NewLayerNorm(%v): the normalised shape must be non-empty", shape))
	}
	ln := &LayerNorm{Shape: shape.Clone(), Eps: opt.Eps}
	if ln.Eps == 0 {
		ln.Eps = 1e-5
	}
	if !opt.NoAffine {
		ln.Weight = ln.RegisterParameter("weight", autograd.Param(tensor.Ones(shape, opts...)))
		ln.Bias = ln.RegisterParameter("bias", autograd.Param(tensor.Zeros(shape, opts...)))
	}
	return ln
}

// Forward normalises x [..., Shape...].
func (ln *LayerNorm) Forward(x *autograd.Var) *autograd.Var {
	xs, k := x.Value.Shape(), len(ln.Shape)
	if len(xs) < k || !xs[len(xs)-k:].Equal(ln.Shape) {
		panic(fmt.Sprintf("nn: LayerNorm(%v): input of shape %v; its trailing axes must be %v", ln.Shape, xs, ln.Shape))
	}
	return autograd.LayerNorm(x, ln.Weight, ln.Bias, ln.Shape.NumElements(), ln.Eps)
}
