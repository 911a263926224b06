package tensor

import (
	"fmt"
	"slices"

	"github.com/flockml/flock/backend"
)

// reduceAxes normalises axes (negative ones count from the end) into a
// sorted list; no axes means all of them.
func (t *Tensor) reduceAxes(op string, axes []int) []int {
	if len(axes) == 0 {
		all := make([]int, t.Dim())
		for i := range all {
			all[i] = i
		}
		return all
	}
	out := make([]int, len(axes))
	for i, a := range axes {
		out[i] = t.axis(op, a)
	}
	slices.Sort(out)
	for i := 1; i < len(out); i++ {
		if out[i] == out[i-1] {
			panic(fmt.Sprintf("tensor: %s: axis %d repeated in %v", op, out[i], axes))
		}
	}
	return out
}

// reducedShape is t's shape without axes, or with them set to 1 when keep.
func (t *Tensor) reducedShape(axes []int, keep bool) Shape {
	s := Shape{}
	for i, d := range t.shape {
		switch {
		case !slices.Contains(axes, i):
			s = append(s, d)
		case keep:
			s = append(s, 1)
		}
	}
	return s
}

// reduce runs op over axes. Integer and Bool tensors are reduced in float64
// (exact for magnitudes below 2⁵³): Sum then gives Int64, Max and Min keep
// the dtype.
func (t *Tensor) reduce(op backend.ReduceOp, name string, axes []int, keep bool, correction int) *Tensor {
	t.live()
	ax := t.reduceAxes(name, axes)
	if t.dtype != Float32 && t.dtype != Float64 {
		if !(t.dtype.IsInt() || t.dtype == Bool) || op == backend.Mean || op == backend.Var {
			floatOnly(name, t)
		}
		f := t.Cast(Float64)
		defer f.Release()
		r := f.reduce(op, name, axes, keep, correction)
		defer r.Release()
		switch op {
		case backend.Sum:
			return r.Cast(Int64)
		case backend.Max, backend.Min:
			return r.Cast(t.dtype)
		}
		return r.Retain()
	}
	dt := t.dtype
	if op == backend.ArgMax || op == backend.ArgMin {
		dt = Int64
	}
	out := empty(t.Device(), dt, t.reducedShape(ax, false))
	must(name, t.Device().Reduce(op, out.Raw(), t.Raw(), ax, backend.ReduceParams{Correction: correction}), t)
	if !keep {
		return out
	}
	defer out.Release()
	return out.View(t.reducedShape(ax, true)...)
}

// Sum returns the sum over axes (all axes when none are given), which are
// removed from the shape. Integer and Bool tensors sum to Int64.
func (t *Tensor) Sum(axes ...int) *Tensor { return t.reduce(backend.Sum, "Sum", axes, false, 0) }

// SquaredNorm returns Σ t², the square of t's Euclidean norm, as the sum
// of the squared elements in t's dtype (float tensors only).
func (t *Tensor) SquaredNorm() float64 {
	sq := t.Square()
	defer sq.Release()
	s := sq.Sum()
	defer s.Release()
	return s.Item()
}

// Mean returns the mean over axes (all when none are given).
func (t *Tensor) Mean(axes ...int) *Tensor { return t.reduce(backend.Mean, "Mean", axes, false, 0) }

// Max returns the maximum over axes (all when none are given); NaN
// propagates.
func (t *Tensor) Max(axes ...int) *Tensor { return t.reduce(backend.Max, "Max", axes, false, 0) }

// Min returns the minimum over axes (all when none are given); NaN
// propagates.
func (t *Tensor) Min(axes ...int) *Tensor { return t.reduce(backend.Min, "Min", axes, false, 0) }

// SumKeepDim is Sum with the reduced axes kept as extent 1.
func (t *Tensor) SumKeepDim(axes ...int) *Tensor { return t.reduce(backend.Sum, "Sum", axes, true, 0) }

// MeanKeepDim is Mean with the reduced axes kept as extent 1.
func (t *Tensor) MeanKeepDim(axes ...int) *Tensor {
	return t.reduce(backend.Mean, "Mean", axes, true, 0)
}

// MaxKeepDim is Max with the reduced axes kept as extent 1.
func (t *Tensor) MaxKeepDim(axes ...int) *Tensor { return t.reduce(backend.Max, "Max", axes, true, 0) }

// MinKeepDim is Min with the reduced axes kept as extent 1.
func (t *Tensor) MinKeepDim(axes ...int) *Tensor { return t.reduce(backend.Min, "Min", axes, true, 0) }

// Var returns the variance over axes (all when none are given),
// Σ(x−mean)²/(N−correction): correction 0 is the population variance, 1
// the unbiased sample variance (torch.var's default).
func (t *Tensor) Var(correction int, axes ...int) *Tensor {
	return t.reduce(backend.Var, "Var", axes, false, correction)
}

// VarKeepDim is Var with the reduced axes kept as extent 1.
func (t *Tensor) VarKeepDim(correction int, axes ...int) *Tensor {
	return t.reduce(backend.Var, "Var", axes, true, correction)
}

// ArgMax returns the Int64 positions of the maxima along axis (the first on
// ties; NaN counts as the maximum), with axis removed.
func (t *Tensor) ArgMax(axis int) *Tensor {
	return t.reduce(backend.ArgMax, "ArgMax", []int{t.axis("ArgMax", axis)}, false, 0)
}

// ArgMin returns the Int64 positions of the minima along axis (the first on
// ties; NaN counts as the minimum), with axis removed.
func (t *Tensor) ArgMin(axis int) *Tensor {
	return t.reduce(backend.ArgMin, "ArgMin", []int{t.axis("ArgMin", axis)}, false, 0)
}

// SumTo sums t down to shape, the inverse of broadcasting shape up to t's
// shape: leading axes that shape lacks and axes where shape has extent 1 are
// summed. It is the gradient of BroadcastTo. When t already has shape, the
// result is t itself (a new reference).
func (t *Tensor) SumTo(shape Shape) *Tensor {
	if t.shape.Equal(shape) {
		return t.Retain()
	}
	fail := func() {
		panic(fmt.Sprintf("tensor: SumTo: shape %v does not broadcast to %v", shape, t.shape))
	}
	lead := t.Dim() - len(shape)
	var axes []int
	for i := range max(t.Dim(), len(shape)) {
		ti, si := i-max(-lead, 0), i-max(lead, 0)
		switch {
		case ti < 0: // shape has an extra leading axis
			if shape[si] != 1 {
				fail()
			}
		case si < 0:
			axes = append(axes, ti)
		case shape[si] == t.shape[ti]:
		case shape[si] == 1:
			axes = append(axes, ti)
		default:
			fail()
		}
	}
	if len(axes) == 0 {
		return t.Reshape(shape...)
	}
	s := t.Sum(axes...)
	defer s.Release()
	return s.Reshape(shape...)
}
