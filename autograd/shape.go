package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// The ops in this file move elements without changing them, so each
// gradient is the output gradient moved back: reshaped, permuted, scattered
// into zeros or summed over broadcast axes. Results that tensor returns as
// views (Reshape, Permute, Slice, ...) are views here too, sharing x's value.

// reshapeGrad records an op whose output holds x's elements in the same
// order under another shape, so the gradient is g reshaped to x's shape.
func reshapeGrad(op string, x *Var, out *tensor.Tensor) *Var {
	xs := x.Shape().Clone()
	return recordUnary(op, x, out, nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.Reshape(xs...)
	})
}

// Reshape returns x with a new shape (one extent may be −1), a view when
// x's layout allows it.
func Reshape(x *Var, shape ...int) *Var {
	return reshapeGrad("Reshape", x, x.Value.Reshape(shape...))
}

// Flatten merges axes [start, end] (inclusive, negatives allowed) into one.
func Flatten(x *Var, start, end int) *Var {
	return reshapeGrad("Flatten", x, x.Value.Flatten(start, end))
}

// Unsqueeze inserts an axis of extent 1 at axis (−1 appends).
func Unsqueeze(x *Var, axis int) *Var {
	return reshapeGrad("Unsqueeze", x, x.Value.Unsqueeze(axis))
}

// Squeeze removes the given axes of extent 1, or every axis of extent 1
// when none are given.
func Squeeze(x *Var, axes ...int) *Var {
	return reshapeGrad("Squeeze", x, x.Value.Squeeze(axes...))
}

// Permute reorders x's axes: axis i of the result is axis axes[i] of x. The
// gradient is permuted back by the inverse permutation.
func Permute(x *Var, axes ...int) *Var {
	out := x.Value.Permute(axes...)
	inv := make([]int, len(axes))
	for i, a := range axes {
		inv[x.Value.Axis("Permute", a)] = i
	}
	return recordUnary("Permute", x, out, nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.Permute(inv...)
	})
}

// Transpose swaps axes a and b.
func Transpose(x *Var, a, b int) *Var {
	return recordUnary("Transpose", x, x.Value.Transpose(a, b), nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.Transpose(a, b)
	})
}

// scatterGrad returns a tensor of shape xs holding g in positions
// [start, end) of axis and zeros elsewhere: the gradient of taking that
// part of x (a Select when squeeze is set, start+1 = end). Only the
// positions outside the part are zeroed, so each element is written once.
func scatterGrad(g *tensor.Tensor, xs tensor.Shape, axis, start, end int, squeeze bool) *tensor.Tensor {
	z := tensor.Empty(xs, tensor.Of(g.DType()), tensor.On(g.Device()))
	for _, r := range [][2]int{{0, start}, {end, xs[axis]}} {
		if r[0] < r[1] {
			rest := z.Slice(axis, r[0], r[1])
			rest.Fill(0)
			rest.Release()
		}
	}
	var part *tensor.Tensor
	if squeeze {
		part = z.Select(axis, start)
	} else {
		part = z.Slice(axis, start, end)
	}
	defer part.Release()
	part.CopyFrom(g)
	return z
}

// recordSlice records out, the part [start, end) of axis of x, with the
// bounds read as tensor.Slice reads them (negative from the end, clamped).
func recordSlice(op string, x *Var, out *tensor.Tensor, axis, start, end int) *Var {
	xs := x.Shape().Clone()
	ax := x.Value.Axis(op, axis)
	clamp := func(i int) int {
		if i < 0 {
			i += xs[ax]
		}
		return max(0, min(i, xs[ax]))
	}
	start, end = clamp(start), clamp(end)
	end = max(end, start)
	return recordUnary(op, x, out, nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return scatterGrad(g, xs, ax, start, end, false)
	})
}

// Slice returns the view of x with axis restricted to [start, end);
// negative bounds count from the end and bounds are clamped like Python
// slices.
func Slice(x *Var, axis, start, end int) *Var {
	return recordSlice("Slice", x, x.Value.Slice(axis, start, end), axis, start, end)
}

// Select returns the view of x at index i of axis, with that axis removed.
func Select(x *Var, axis, i int) *Var {
	xs := x.Shape().Clone()
	out := x.Value.Select(axis, i)
	ax := x.Value.Axis("Select", axis)
	if i < 0 {
		i += xs[ax]
	}
	return recordUnary("Select", x, out, nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return scatterGrad(g, xs, ax, i, i+1, true)
	})
}

// BroadcastTo returns x expanded to shape under NumPy's rules (a view). The
// gradient sums over the broadcast axes.
func BroadcastTo(x *Var, shape tensor.Shape) *Var {
	xs := x.Shape().Clone()
	return recordUnary("BroadcastTo", x, x.Value.BroadcastTo(shape), nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.SumTo(xs)
	})
}

// Expand is BroadcastTo with PyTorch's spelling: −1 keeps an extent.
func Expand(x *Var, shape ...int) *Var {
	xs := x.Shape().Clone()
	return recordUnary("Expand", x, x.Value.Expand(shape...), nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.SumTo(xs)
	})
}

// varValues returns the tensors of vs.
func varValues(op string, vs []*Var) []*tensor.Tensor {
	if len(vs) == 0 {
		panic(fmt.Sprintf("autograd: %s of no Vars", op))
	}
	ts := make([]*tensor.Tensor, len(vs))
	for i, v := range vs {
		ts[i] = v.Value
	}
	return ts
}

// Concat joins xs along an existing axis. Input i's gradient is its part of
// the output gradient (a view).
func Concat(axis int, xs ...*Var) *Var {
	out := tensor.Concat(axis, varValues("Concat", xs)...)
	ax := out.Axis("Concat", axis)
	ends := make([]int, len(xs))
	end := 0
	for i, x := range xs {
		end += x.Value.Size(ax)
		ends[i] = end
	}
	return Record("Concat", out, xs, nil, func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
		gs := make([]*tensor.Tensor, len(ends))
		start := 0
		for i, end := range ends {
			if ctx.Needs(i) {
				gs[i] = g.Slice(ax, start, end)
			}
			start = end
		}
		return gs
	})
}

// Stack joins xs, which share one shape, along a new axis. Input i's
// gradient is index i of that axis of the output gradient (a view).
func Stack(axis int, xs ...*Var) *Var {
	out := tensor.Stack(axis, varValues("Stack", xs)...)
	ax := out.Axis("Stack", axis)
	n := len(xs)
	return Record("Stack", out, xs, nil, func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
		gs := make([]*tensor.Tensor, n)
		for i := range gs {
			if ctx.Needs(i) {
				gs[i] = g.Select(ax, i)
			}
		}
		return gs
	})
}

// Split cuts x along axis into consecutive parts of the given sizes (views
// of x). Each part is an op of its own, so x's gradient is the sum of the
// parts' gradients, each scattered into zeros of x's shape.
func Split(x *Var, axis int, sizes ...int) []*Var {
	return splitParts("Split", x, axis, x.Value.Split(axis, sizes...))
}

// Chunk cuts x along axis into n parts of equal size (the last may be
// smaller), as views of x; see Split for the gradient.
func Chunk(x *Var, n, axis int) []*Var {
	return splitParts("Chunk", x, axis, x.Value.Chunk(n, axis))
}

func splitParts(op string, x *Var, axis int, parts []*tensor.Tensor) []*Var {
	ax := x.Value.Axis(op, axis)
	vs := make([]*Var, len(parts))
	start := 0
	for i, p := range parts {
		end := start + p.Size(ax)
		vs[i] = recordSlice(op, x, p, ax, start, end)
		start = end
	}
	return vs
}

// Pad pads x with value, pads holding (before, after) pairs starting from
// the last axis as in torch.nn.functional.pad; negative pads crop. The
// gradient is the output gradient padded by −pads with zeros: the padding
// is cropped away and cropped parts get zero.
func Pad(x *Var, pads []int, value float64) *Var {
	neg := make([]int, len(pads))
	for i, p := range pads {
		neg[i] = -p
	}
	return recordUnary("Pad", x, tensor.Pad(x.Value, pads, value), nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return tensor.Pad(g, neg, 0)
	})
}
