package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// Conv2d returns the 2-D cross-correlation of x [N, C, H, W] with w
// [O, C/groups, KH, KW] plus a per-channel bias b [O] (b may be nil):
// y[n,o] = b[o] + Σ_c w[o,c] ⋆ x[n,c].
//
// ∂L/∂x is the transposed convolution of G with w, ∂L/∂w the correlation
// of x with G, and ∂L/∂b = Σ_{n,h,w} G.
func Conv2d(x, w, b *Var, p tensor.ConvParams) *Var {
	out := tensor.Conv2d(x.Value, w.Value, p)
	if b != nil {
		if b.Value.Dim() != 1 || b.Value.Size(0) != out.Size(1) {
			out.Release()
			panic(fmt.Sprintf("autograd: Conv2d: bias of shape %v for %d output channels", b.Value.Shape(), w.Value.Size(0)))
		}
		bb := b.Value.Reshape(1, -1, 1, 1)
		out.AddInPlace(bb)
		bb.Release()
	}
	xShape, wShape := x.Value.Shape().Clone(), w.Value.Shape().Clone()
	return Record("Conv2d", out, []*Var{x, w, b}, []*tensor.Tensor{x.Value, w.Value},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			xv, wv := ctx.Saved[0], ctx.Saved[1]
			gc := g.Contiguous()
			defer gc.Release()
			var gx, gw, gb *tensor.Tensor
			if ctx.Needs(0) {
				gx = tensor.Conv2dBackwardData(gc, wv, xShape, p)
			}
			if ctx.Needs(1) {
				gw = tensor.Conv2dBackwardWeight(xv, gc, wShape, p)
			}
			if ctx.Needs(2) {
				gb = gc.Sum(0, 2, 3)
			}
			return []*tensor.Tensor{gx, gw, gb}
		})
}

// MaxPool2d returns the maximum of each pooling window of x [N, C, H, W].
// The gradient of a window's output flows to the input position that held
// its maximum (the first one on ties, as PyTorch picks).
func MaxPool2d(x *Var, p tensor.PoolParams) *Var {
	out, idx := tensor.MaxPool2d(x.Value, p)
	defer idx.Release()
	xShape := x.Value.Shape().Clone()
	return Record("MaxPool2d", out, []*Var{x}, []*tensor.Tensor{idx},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			gc := g.Contiguous()
			defer gc.Release()
			return []*tensor.Tensor{tensor.MaxPool2dBackward(gc, ctx.Saved[0], xShape, p)}
		})
}

// AvgPool2d returns the mean of each pooling window of x [N, C, H, W]. Each
// window's output gradient is spread evenly over the positions counted in
// its divisor.
func AvgPool2d(x *Var, p tensor.PoolParams) *Var {
	out := tensor.AvgPool2d(x.Value, p)
	xShape := x.Value.Shape().Clone()
	return Record("AvgPool2d", out, []*Var{x}, nil,
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			gc := g.Contiguous()
			defer gc.Release()
			return []*tensor.Tensor{tensor.AvgPool2dBackward(gc, xShape, p)}
		})
}
