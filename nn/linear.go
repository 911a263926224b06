package nn

import (
	"fmt"
	"math"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Linear is the affine map y = x·Wᵀ + b applied to the last axis of x
// ([..., In] → [..., Out]), with parameters "weight" [Out, In] and "bias"
// [Out] (absent when built without bias).
type Linear struct {
	Base
	In, Out int
	Weight  *autograd.Var
	Bias    *autograd.Var // nil without bias
}

// NewLinear returns a Linear layer initialised as PyTorch's nn.Linear: the
// weight by KaimingUniform with a = √5 (U(−1/√In, 1/√In)) and the bias from
// U(−1/√In, 1/√In), drawn from g. opts choose the dtype (float32 by
// default) and device of the parameters.
func NewLinear(in, out int, bias bool, g *tensor.Generator, opts ...tensor.Option) *Linear {
	if in < 0 || out < 0 {
		panic(fmt.Sprintf("nn: NewLinear(%d, %d): negative size", in, out))
	}
	l := &Linear{In: in, Out: out}
	w := tensor.Empty(tensor.Shape{out, in}, opts...)
	KaimingUniform(w, math.Sqrt(5), FanIn, "leaky_relu", g)
	l.Weight = l.RegisterParameter("weight", autograd.Param(w))
	if bias {
		b := tensor.Empty(tensor.Shape{out}, opts...)
		Uniform(b, -biasBound(in), biasBound(in), g)
		l.Bias = l.RegisterParameter("bias", autograd.Param(b))
	}
	return l
}

// biasBound is PyTorch's bias initialisation bound 1/√fanIn (0 for an empty
// fan-in).
func biasBound(fanIn int) float64 {
	if fanIn <= 0 {
		return 0
	}
	return 1 / math.Sqrt(float64(fanIn))
}

// Forward returns x·Wᵀ + b for x [..., In].
func (l *Linear) Forward(x *autograd.Var) *autograd.Var {
	if x.Value.Dim() == 0 || x.Value.Size(-1) != l.In {
		panic(fmt.Sprintf("nn: Linear(%d→%d): input of shape %v; its last axis must be %d", l.In, l.Out, x.Value.Shape(), l.In))
	}
	return autograd.Linear(x, l.Weight, l.Bias)
}
