package nn

import (
	"fmt"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Dropout zeroes each element of its input with probability P during
// training and scales the others by 1/(1−P) (Srivastava et al., 2014), so
// that the expectation is unchanged; in evaluation mode it is the identity.
// Its randomness comes from Generator, so runs are reproducible.
type Dropout struct {
	Base
	P         float64
	Generator *tensor.Generator
}

// NewDropout returns a Dropout layer with drop probability p in [0, 1),
// drawing its masks from g.
func NewDropout(p float64, g *tensor.Generator) *Dropout {
	if !(p >= 0 && p < 1) {
		panic(fmt.Sprintf("nn: NewDropout(%v): the probability must be in [0, 1)", p))
	}
	if g == nil {
		panic("nn: NewDropout: nil generator")
	}
	return &Dropout{P: p, Generator: g}
}

// Forward applies dropout to x in training mode and returns x unchanged
// (as a new Var) otherwise.
func (d *Dropout) Forward(x *autograd.Var) *autograd.Var {
	return dropout(x, d.P, d.Training(), d.Generator)
}

func dropout(x *autograd.Var, p float64, training bool, g *tensor.Generator) *autograd.Var {
	if !training || p == 0 {
		return identity(x)
	}
	return autograd.Dropout(x, p, g)
}
