package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// Dropout zeroes each element of x with probability p and scales the rest
// by 1/(1−p) (inverted dropout; Srivastava et al. 2014), drawing the mask
// from g. The gradient goes through the same mask: ∂L/∂x = G·mask/(1−p).
// With p = 1 every element is dropped and the output and gradient are zero.
func Dropout(x *Var, p float64, g *tensor.Generator) *Var {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("autograd: Dropout: probability %v outside [0, 1]", p))
	}
	if p == 1 {
		zero := tensor.ZerosLike(x.Value)
		return Record("Dropout", zero, []*Var{x}, nil,
			func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{tensor.ZerosLike(g)}
			})
	}
	y, mask := tensor.Dropout(x.Value, p, g)
	defer mask.Release()
	scale := 1 / (1 - p)
	return Record("Dropout", y, []*Var{x}, []*tensor.Tensor{mask},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			kept := g.MulScalar(scale)
			defer kept.Release()
			zero := tensor.Scalar(0, tensor.Of(g.DType()), tensor.On(g.Device()))
			defer zero.Release()
			return []*tensor.Tensor{tensor.Where(ctx.Saved[0], kept, zero)}
		})
}
