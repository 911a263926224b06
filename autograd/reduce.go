package autograd

import (
	"slices"

	"github.com/flockml/flock/tensor"
)

// axisReduction describes a reduction of a value of shape in over some axes:
// keep is in with the reduced axes set to 1 (the keep-dim result shape) and
// n the number of elements folded into each result.
type axisReduction struct {
	in, keep tensor.Shape
	axes     []int
	n        int
}

// newAxisReduction normalises axes for a reduction of x (none means all,
// negatives count from the end).
func newAxisReduction(op string, x *tensor.Tensor, axes []int) axisReduction {
	r := axisReduction{in: x.Shape().Clone(), keep: x.Shape().Clone(), axes: slices.Clone(axes), n: 1}
	reduced := make([]bool, x.Dim())
	for _, a := range axes {
		reduced[x.Axis(op, a)] = true
	}
	for i := range reduced {
		if len(axes) == 0 || reduced[i] {
			r.n *= r.in[i]
			r.keep[i] = 1
		}
	}
	return r
}

// keepDim returns g, the gradient of the result, with the reduced axes
// restored as axes of extent 1.
func (r axisReduction) keepDim(g *tensor.Tensor) *tensor.Tensor { return g.Reshape(r.keep...) }

// expand returns g broadcast back over the reduced axes, to the input's
// shape.
func (r axisReduction) expand(g *tensor.Tensor) *tensor.Tensor {
	k := r.keepDim(g)
	defer k.Release()
	return k.BroadcastTo(r.in)
}

// Sum returns the sum of x over axes (all when none are given), removing
// them: ∂/∂xᵢ = 1 for every element folded into a sum.
func Sum(x *Var, axes ...int) *Var {
	return sum("Sum", x, x.Value.Sum(axes...), axes)
}

// SumKeepDim is Sum keeping the reduced axes with extent 1.
func SumKeepDim(x *Var, axes ...int) *Var {
	return sum("SumKeepDim", x, x.Value.SumKeepDim(axes...), axes)
}

func sum(op string, x *Var, out *tensor.Tensor, axes []int) *Var {
	r := newAxisReduction(op, x.Value, axes)
	return recordUnary(op, x, out, nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return r.expand(g)
	})
}

// Mean returns the mean of x over axes (all when none are given), removing
// them: ∂/∂xᵢ = 1/n for the n elements folded into each mean.
func Mean(x *Var, axes ...int) *Var {
	return mean("Mean", x, x.Value.Mean(axes...), axes)
}

// MeanKeepDim is Mean keeping the reduced axes with extent 1.
func MeanKeepDim(x *Var, axes ...int) *Var {
	return mean("MeanKeepDim", x, x.Value.MeanKeepDim(axes...), axes)
}

func mean(op string, x *Var, out *tensor.Tensor, axes []int) *Var {
	r := newAxisReduction(op, x.Value, axes)
	return recordUnary(op, x, out, nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		s := g.MulScalar(1 / float64(r.n))
		defer s.Release()
		return r.expand(s)
	})
}

// Max returns the maximum of x over axes (all when none are given),
// removing them. The gradient is shared equally among the elements that
// attain the maximum, like torch.amax: ∂/∂xᵢ = [xᵢ = y]/#{j: xⱼ = y}.
func Max(x *Var, axes ...int) *Var {
	return extreme("Max", x, x.Value.Max(axes...), axes)
}

// MaxKeepDim is Max keeping the reduced axes with extent 1.
func MaxKeepDim(x *Var, axes ...int) *Var {
	return extreme("MaxKeepDim", x, x.Value.MaxKeepDim(axes...), axes)
}

// Min returns the minimum of x over axes (all when none are given),
// removing them; the gradient is shared among tied minima as in Max.
func Min(x *Var, axes ...int) *Var {
	return extreme("Min", x, x.Value.Min(axes...), axes)
}

// MinKeepDim is Min keeping the reduced axes with extent 1.
func MinKeepDim(x *Var, axes ...int) *Var {
	return extreme("MinKeepDim", x, x.Value.MinKeepDim(axes...), axes)
}

func extreme(op string, x *Var, out *tensor.Tensor, axes []int) *Var {
	r := newAxisReduction(op, x.Value, axes)
	return Record(op, out, []*Var{x}, []*tensor.Tensor{x.Value, out},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			x, y := ctx.Saved[0], ctx.Saved[1]
			var tmp gradTemps
			defer tmp.release()
			yk := tmp.keep(r.keepDim(y))
			hit := tmp.keep(x.Eq(yk))
			w := tmp.keep(hit.Cast(x.DType()))
			count := tmp.keep(w.SumKeepDim(r.axes...))
			gk := tmp.keep(r.keepDim(g))
			share := tmp.keep(gk.Div(count))
			return []*tensor.Tensor{w.Mul(share)}
		})
}

// Variance returns the variance of x over axes (all when none are given),
// removing them, like Tensor.Var: v = Σ(xᵢ−μ)²/(n−c) with c the correction
// (0 for the population variance, 1 for the unbiased sample variance), and
// ∂v/∂xᵢ = 2(xᵢ−μ)/(n−c).
func Variance(x *Var, correction int, axes ...int) *Var {
	return variance("Variance", x, x.Value.Var(correction, axes...), correction, axes)
}

// VarianceKeepDim is Variance keeping the reduced axes with extent 1.
func VarianceKeepDim(x *Var, correction int, axes ...int) *Var {
	return variance("VarianceKeepDim", x, x.Value.VarKeepDim(correction, axes...), correction, axes)
}

func variance(op string, x *Var, out *tensor.Tensor, correction int, axes []int) *Var {
	r := newAxisReduction(op, x.Value, axes)
	return recordUnary(op, x, out, x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		var tmp gradTemps
		defer tmp.release()
		mu := tmp.keep(x.MeanKeepDim(r.axes...))
		d := tmp.keep(x.Sub(mu))
		gk := tmp.keep(r.keepDim(g))
		scaled := tmp.keep(gk.MulScalar(2 / float64(r.n-correction)))
		return d.Mul(scaled)
	})
}
