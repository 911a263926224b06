package nn

import (
	"github.com/flockml/flock/autograd"
)

// ReLU is max(x, 0), elementwise. It has no parameters.
type ReLU struct{ Base }

// NewReLU returns a ReLU layer.
func NewReLU() *ReLU { return &ReLU{} }

// Forward returns max(x, 0).
func (*ReLU) Forward(x *autograd.Var) *autograd.Var { return autograd.ReLU(x) }

// GELU is the Gaussian error linear unit x·Φ(x) (Hendrycks and Gimpel,
// 2016), elementwise, or its tanh approximation
// x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))) when Tanh is set (PyTorch's
// approximate="tanh"). It has no parameters.
type GELU struct {
	Base
	Tanh bool
}

// NewGELU returns a GELU layer, exact unless tanh is set.
func NewGELU(tanh bool) *GELU { return &GELU{Tanh: tanh} }

// Forward returns GELU(x).
func (l *GELU) Forward(x *autograd.Var) *autograd.Var {
	if l.Tanh {
		return autograd.GELUTanh(x)
	}
	return autograd.GELU(x)
}

// Identity returns its input. It has no parameters.
type Identity struct{ Base }

// NewIdentity returns an Identity layer.
func NewIdentity() *Identity { return &Identity{} }

// Forward returns x's value as a new Var through which gradients pass
// unchanged.
func (*Identity) Forward(x *autograd.Var) *autograd.Var { return identity(x) }

// Flatten merges the axes StartDim…EndDim of its input into one (negative
// axes count from the end), as PyTorch's nn.Flatten. It has no parameters.
type Flatten struct {
	Base
	StartDim, EndDim int
}

// NewFlatten returns a Flatten over axes start…end; PyTorch's default is
// NewFlatten(1, -1), which keeps the batch axis.
func NewFlatten(start, end int) *Flatten { return &Flatten{StartDim: start, EndDim: end} }

// Forward returns x with axes StartDim…EndDim merged.
func (l *Flatten) Forward(x *autograd.Var) *autograd.Var {
	return autograd.Flatten(x, l.StartDim, l.EndDim)
}
