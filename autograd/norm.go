package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// BatchNorm normalises x [N, C, ...] per channel:
// y = (x − μ_c)/√(σ²_c + ε)·w_c + b_c, with w and b [C] optional (nil).
//
// In training (p.Training) μ and σ² are the batch mean and biased variance
// over every axis but C; runningMean and runningVar, when given, are updated
// in place with momentum p.Momentum (the unbiased variance, as PyTorch
// does), and the gradient flows through the batch statistics (Ioffe &
// Szegedy 2015, §3):
//
//	x̂ = (x − μ)·s, s = 1/√(σ² + ε), n elements per channel,
//	∂L/∂x = w·s·(G − mean(G) − x̂·mean(G·x̂)),
//	∂L/∂w = Σ G·x̂, ∂L/∂b = Σ G.
//
// In evaluation μ and σ² are the running statistics (required), so y is an
// affine map of x: ∂L/∂x = G·w·s, with ∂L/∂w and ∂L/∂b as above.
func BatchNorm(x, w, b *Var, runningMean, runningVar *tensor.Tensor, p tensor.NormParams) *Var {
	return batchNorm("BatchNorm", x, w, b, runningMean, runningVar, p, false)
}

// BatchNormReLU returns ReLU(BatchNorm(x, w, b, ...)), the pair that
// follows most convolutions of a ResNet, as one op: where the device has the
// fused kernel (backend.FusedBatchNormReLU) the output is written once and
// the backward pass masks the gradient as it reads it. With y the output,
// the gradients are BatchNorm's of G·[y > 0].
func BatchNormReLU(x, w, b *Var, runningMean, runningVar *tensor.Tensor, p tensor.NormParams) *Var {
	return batchNorm("BatchNormReLU", x, w, b, runningMean, runningVar, p, true)
}

func batchNorm(op string, x, w, b *Var, runningMean, runningVar *tensor.Tensor, p tensor.NormParams, relu bool) *Var {
	if x.Value.Dim() < 2 {
		panic(fmt.Sprintf("autograd: %s: input of shape %v; it needs at least [N, C]", op, x.Value.Shape()))
	}
	var wt, bt *tensor.Tensor
	if w != nil {
		wt = w.Value
	}
	if b != nil {
		bt = b.Value
	}
	if !p.Training {
		return batchNormEval(op, x, w, b, wt, bt, runningMean, runningVar, p, relu)
	}
	var y, mean, invStd *tensor.Tensor
	if relu {
		y, mean, invStd = tensor.BatchNormReLU(x.Value, wt, bt, runningMean, runningVar, p)
	} else {
		y, mean, invStd = tensor.BatchNorm(x.Value, wt, bt, runningMean, runningVar, p)
	}
	defer mean.Release()
	defer invStd.Release()
	saved := []*tensor.Tensor{x.Value, wt, mean, invStd}
	if relu {
		saved = append(saved, y)
	}
	return Record(op, y, []*Var{x, w, b}, saved,
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			xv, wv, mean, invStd := ctx.Saved[0], ctx.Saved[1], ctx.Saved[2], ctx.Saved[3]
			gc := g.Contiguous()
			defer gc.Release()
			var dx, dw, db *tensor.Tensor
			if relu {
				dx, dw, db = tensor.BatchNormReLUBackward(gc, ctx.Saved[4], xv, wv, mean, invStd, p)
			} else {
				dx, dw, db = tensor.BatchNormBackward(gc, xv, wv, mean, invStd, p)
			}
			if !ctx.Needs(0) {
				dx.Release()
				dx = nil
			}
			if !ctx.Needs(1) {
				dw.Release()
				dw = nil
			}
			if !ctx.Needs(2) {
				db.Release()
				db = nil
			} else if db == nil {
				// No weight: the bias's gradient is the sum of the
				// (masked) output gradient.
				gm := gc.Retain()
				if relu {
					gm.Release()
					gm = tensor.ReLUGrad(gc, ctx.Saved[4])
				}
				db = gm.Sum(channelAxesExcept(gc.Dim())...)
				gm.Release()
			}
			return []*tensor.Tensor{dx, dw, db}
		})
}

func batchNormEval(op string, x, w, b *Var, wt, bt, runningMean, runningVar *tensor.Tensor, p tensor.NormParams, relu bool) *Var {
	if runningMean == nil || runningVar == nil {
		panic(fmt.Sprintf("autograd: %s: evaluation mode needs running statistics", op))
	}
	var y *tensor.Tensor
	if relu {
		y, _, _ = tensor.BatchNormReLU(x.Value, wt, bt, runningMean, runningVar, p)
	} else {
		y, _, _ = tensor.BatchNorm(x.Value, wt, bt, runningMean, runningVar, p)
	}
	// Later training steps update the running statistics in place, so keep
	// copies of what this forward pass used.
	bshape := channelShape(x.Value.Dim(), x.Value.Size(1))
	rm := runningMean.Reshape(bshape...)
	mean := rm.Clone()
	rm.Release()
	defer mean.Release()
	rv := runningVar.Reshape(bshape...)
	ve := rv.AddScalar(p.Eps)
	rv.Release()
	invStd := ve.Rsqrt()
	ve.Release()
	defer invStd.Release()
	saved := []*tensor.Tensor{x.Value, wt, mean, invStd}
	if relu {
		saved = append(saved, y)
	}
	return Record(op, y, []*Var{x, w, b}, saved,
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			xv, wv, mean, invStd := ctx.Saved[0], ctx.Saved[1], ctx.Saved[2], ctx.Saved[3]
			if relu {
				g = tensor.ReLUGrad(g, ctx.Saved[4])
				defer g.Release()
			}
			axes := channelAxesExcept(g.Dim())
			var dx, dw, db *tensor.Tensor
			if ctx.Needs(0) {
				scale := invStd.Retain()
				if wv != nil {
					wb := wv.Reshape(mean.Shape()...)
					s := scale.Mul(wb)
					wb.Release()
					scale.Release()
					scale = s
				}
				dx = g.Mul(scale)
				scale.Release()
			}
			if ctx.Needs(1) {
				c := xv.Sub(mean)
				c.MulInPlace(invStd)
				c.MulInPlace(g)
				dw = c.Sum(axes...)
				c.Release()
			}
			if ctx.Needs(2) {
				db = g.Sum(axes...)
			}
			return []*tensor.Tensor{dx, dw, db}
		})
}

// channelShape is [1, c, 1, ...] of the given rank: a per-channel vector
// laid out to broadcast against [N, C, ...].
func channelShape(rank, c int) []int {
	s := make([]int, rank)
	for i := range s {
		s[i] = 1
	}
	s[1] = c
	return s
}

// channelAxesExcept lists every axis of a rank-r [N, C, ...] tensor but 1.
func channelAxesExcept(rank int) []int {
	axes := []int{0}
	for a := 2; a < rank; a++ {
		axes = append(axes, a)
	}
	return axes
}

// LayerNorm normalises each group of the last normSize elements of x:
// y = (x − μ)/√(σ² + ε)·w + b, with μ and σ² the group's mean and biased
// variance and w, b (normSize elements, optional) shared by all groups. With
// x̂ = (x − μ)·s, s = 1/√(σ² + ε) (Ba, Kiros & Hinton 2016):
//
//	∂L/∂x = s·(Gw − mean(Gw) − x̂·mean(Gw·x̂)), Gw = G·w,
//	∂L/∂w = Σ_groups G·x̂, ∂L/∂b = Σ_groups G.
func LayerNorm(x, w, b *Var, normSize int, eps float64) *Var {
	var wt, bt *tensor.Tensor
	if w != nil {
		wt = w.Value
	}
	if b != nil {
		bt = b.Value
	}
	y, mean, rstd := tensor.LayerNorm(x.Value, wt, bt, normSize, eps)
	defer mean.Release()
	defer rstd.Release()
	var wShape, bShape tensor.Shape
	if w != nil {
		wShape = w.Value.Shape().Clone()
	}
	if b != nil {
		bShape = b.Value.Shape().Clone()
	}
	return Record("LayerNorm", y, []*Var{x, w, b}, []*tensor.Tensor{x.Value, wt, mean, rstd},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			xv, wv, mean, rstd := ctx.Saved[0], ctx.Saved[1], ctx.Saved[2], ctx.Saved[3]
			gc := g.Contiguous()
			defer gc.Release()
			dx, dw, db := tensor.LayerNormBackward(gc, xv, wv, mean, rstd, normSize)
			if !ctx.Needs(0) {
				dx.Release()
				dx = nil
			}
			if ctx.Needs(1) {
				dw = reshapeTo(dw, wShape)
			} else {
				dw.Release()
				dw = nil
			}
			switch {
			case !ctx.Needs(2):
				db.Release()
				db = nil
			case db == nil:
				g2 := gc.Reshape(-1, normSize)
				db = g2.Sum(0)
				g2.Release()
				fallthrough
			default:
				db = reshapeTo(db, bShape)
			}
			return []*tensor.Tensor{dx, dw, db}
		})
}

// reshapeTo returns t viewed with shape (t itself when it already has it),
// releasing t.
func reshapeTo(t *tensor.Tensor, shape tensor.Shape) *tensor.Tensor {
	if t == nil || t.Shape().Equal(shape) {
		return t
	}
	defer t.Release()
	return t.Reshape(shape...)
}
