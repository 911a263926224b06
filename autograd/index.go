package autograd

import "github.com/flockml/flock/tensor"

// Gather picks y[..i..] = x[..index[..i..]..] along axis, like
// torch.gather. Its gradient scatters G back: ∂L/∂x = 0 with
// ScatterAdd(axis, index, G), so positions picked twice sum their
// gradients.
func Gather(x *Var, axis int, index *tensor.Tensor) *Var {
	axis = x.Value.Axis("Gather", axis)
	out := tensor.Gather(x.Value, axis, index)
	xShape := x.Value.Shape().Clone()
	return Record("Gather", out, []*Var{x}, []*tensor.Tensor{index},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			gx := tensor.Zeros(xShape, tensor.Of(g.DType()), tensor.On(g.Device()))
			gx.ScatterAddInPlace(axis, ctx.Saved[0], g)
			return []*tensor.Tensor{gx}
		})
}

// IndexSelect keeps the entries of the 1-D index along axis, like
// torch.index_select. Its gradient adds each slice of G into the slice of x
// it came from: ∂L/∂x = 0 with IndexAdd(axis, index, G).
func IndexSelect(x *Var, axis int, index *tensor.Tensor) *Var {
	axis = x.Value.Axis("IndexSelect", axis)
	out := tensor.IndexSelect(x.Value, axis, index)
	xShape := x.Value.Shape().Clone()
	return Record("IndexSelect", out, []*Var{x}, []*tensor.Tensor{index},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			gx := tensor.Zeros(xShape, tensor.Of(g.DType()), tensor.On(g.Device()))
			gx.IndexAddInPlace(axis, ctx.Saved[0], g)
			return []*tensor.Tensor{gx}
		})
}

// Embedding looks up rows of w [V, D] for every entry of index (any shape),
// returning index's shape + [D]. The gradient of row v is the sum of G over
// the positions where index = v.
func Embedding(w *Var, index *tensor.Tensor) *Var {
	out := tensor.Embedding(w.Value, index)
	wShape := w.Value.Shape().Clone()
	return Record("Embedding", out, []*Var{w}, []*tensor.Tensor{index},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			flat := ctx.Saved[0].Reshape(-1)
			defer flat.Release()
			g2 := g.Reshape(-1, wShape[1])
			defer g2.Release()
			gw := tensor.Zeros(wShape, tensor.Of(g.DType()), tensor.On(g.Device()))
			gw.IndexAddInPlace(0, flat, g2)
			return []*tensor.Tensor{gw}
		})
}
