package nn

import (
	"fmt"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Embedding is a lookup table: row i of "weight" [Num, Dim] is the vector of
// index i.
type Embedding struct {
	Base
	Num, Dim int
	Weight   *autograd.Var
}

// NewEmbedding returns an Embedding of num vectors of size dim, drawn from
// N(0, 1) with g as PyTorch's nn.Embedding. opts choose the dtype and
// device of the weight.
func NewEmbedding(num, dim int, g *tensor.Generator, opts ...tensor.Option) *Embedding {
	if num <= 0 || dim <= 0 {
		panic(fmt.Sprintf("nn: NewEmbedding(%d, %d): sizes must be positive", num, dim))
	}
	e := &Embedding{Num: num, Dim: dim}
	w := tensor.Empty(tensor.Shape{num, dim}, opts...)
	Normal(w, 0, 1, g)
	e.Weight = e.RegisterParameter("weight", autograd.Param(w))
	return e
}

// Lookup returns the vectors of index (int32 or int64, any shape) as
// [index.shape..., Dim].
func (e *Embedding) Lookup(index *tensor.Tensor) *autograd.Var {
	return autograd.Embedding(e.Weight, index)
}

// Forward is Lookup of x's value, so that an Embedding can open a
// Sequential.
func (e *Embedding) Forward(x *autograd.Var) *autograd.Var { return e.Lookup(x.Value) }
