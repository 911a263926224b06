package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// Reduction says how a loss combines its per-element values.
type Reduction int

// Reductions, with PyTorch's meaning. The zero value is ReductionMean, as in
// PyTorch.
const (
	// ReductionMean averages over the elements (for CrossEntropy: over the
	// rows whose target is not ignored).
	ReductionMean Reduction = iota
	// ReductionSum adds the elements up.
	ReductionSum
	// ReductionNone returns the per-element losses.
	ReductionNone
)

func (r Reduction) String() string {
	switch r {
	case ReductionMean:
		return "mean"
	case ReductionSum:
		return "sum"
	case ReductionNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

// DefaultIgnoreIndex is the target value that CrossEntropy skips when
// CrossEntropyOptions leaves IgnoreIndex zero: PyTorch's default.
const DefaultIgnoreIndex = -100

// CrossEntropyOptions are the settings of CrossEntropy. The zero value is
// torch.nn.functional.cross_entropy's default: no label smoothing, targets
// equal to -100 ignored, mean reduction.
type CrossEntropyOptions struct {
	// LabelSmoothing ε replaces the one-hot target by (1−ε)·onehot + ε/C.
	LabelSmoothing float64
	// IgnoreIndex is the target value whose rows add nothing to the loss or
	// the gradient and are left out of ReductionMean's divisor. Its zero
	// value stands for DefaultIgnoreIndex; to skip class 0, set
	// UseIgnoreIndex, which makes IgnoreIndex apply as given.
	IgnoreIndex    int64
	UseIgnoreIndex bool
	// Reduction combines the per-row losses.
	Reduction Reduction
}

func (o CrossEntropyOptions) params() tensor.CrossEntropyParams {
	p := tensor.CrossEntropyParams{LabelSmoothing: o.LabelSmoothing, IgnoreIndex: DefaultIgnoreIndex}
	if o.IgnoreIndex != 0 || o.UseIgnoreIndex {
		p.IgnoreIndex = o.IgnoreIndex
	}
	return p
}

// CrossEntropy returns the cross-entropy between the softmax of logits and
// integer class targets (Int32 or Int64), like
// torch.nn.functional.cross_entropy: logits [N, C] with target [N], logits
// [C] with a scalar target, or logits [N, C, d1, ...] with target
// [N, d1, ...]. The per-row loss is ℓ = −Σ_c q_c·log softmax(logits)_c with q
// the label-smoothed one-hot target, and
//
//	∂ℓ/∂logits = softmax(logits) − q.
//
// Rows with an ignored target have ℓ = 0 and no gradient. ReductionNone
// returns ℓ with target's shape; ReductionMean divides Σ ℓ by the number of
// rows not ignored (NaN when every row is).
func CrossEntropy(logits *Var, target *tensor.Tensor, opt CrossEntropyOptions) *Var {
	lv := logits.Value
	if !target.DType().IsInt() {
		panic(fmt.Sprintf("autograd: CrossEntropy: target of dtype %v; it must hold integer class indices", target.DType()))
	}
	if lv.Dim() == 0 {
		panic("autograd: CrossEntropy: logits must have a class axis, got a scalar")
	}
	want := tensor.Shape{}
	if lv.Dim() > 1 {
		want = append(tensor.Shape{lv.Size(0)}, lv.Shape()[2:]...)
	}
	if !target.Shape().Equal(want) {
		panic(fmt.Sprintf("autograd: CrossEntropy: logits of shape %v need a target of shape %v, got %v", lv.Shape(), want, target.Shape()))
	}
	switch opt.Reduction {
	case ReductionMean, ReductionSum, ReductionNone:
	default:
		panic(fmt.Sprintf("autograd: CrossEntropy: unknown reduction %v", opt.Reduction))
	}
	p := opt.params()
	lShape := lv.Shape().Clone()
	tShape := target.Shape().Clone()
	rows := rowsOf(lv)
	defer rows.Release()
	tgt := target.Reshape(-1)
	defer tgt.Release()

	loss := tensor.CrossEntropy(rows, tgt, p) // [M]
	var out, count *tensor.Tensor
	switch opt.Reduction {
	case ReductionNone:
		out = loss.Reshape(tShape...)
		loss.Release()
	case ReductionSum:
		out = loss.Sum()
		loss.Release()
	case ReductionMean:
		count = countNotIgnored(tgt, p.IgnoreIndex, lv.DType())
		defer count.Release()
		s := loss.Sum()
		out = s.Div(count)
		s.Release()
		loss.Release()
	}
	m := tgt.Size(0)
	return Record("CrossEntropy", out, []*Var{logits}, []*tensor.Tensor{rows, tgt, count},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			rows, tgt, count := ctx.Saved[0], ctx.Saved[1], ctx.Saved[2]
			var dl *tensor.Tensor // [M]
			switch {
			case count != nil:
				q := g.Div(count)
				dl = broadcastRows(q, m)
				q.Release()
			case g.Dim() == 0:
				dl = broadcastRows(g, m)
			default:
				r := g.Reshape(m)
				dl = r.Contiguous()
				r.Release()
			}
			defer dl.Release()
			d := tensor.CrossEntropyBackward(rows, tgt, dl, p) // [M, C]
			defer d.Release()
			return []*tensor.Tensor{unrows(d, lShape)}
		})
}

// rowsOf lays logits out as a contiguous [M, C] matrix with the class axis
// last: [C] → [1, C]; [N, C, d...] → [N·Πd, C].
func rowsOf(l *tensor.Tensor) *tensor.Tensor {
	switch l.Dim() {
	case 1:
		return l.Reshape(1, -1)
	case 2:
		return l.Contiguous()
	}
	perm := []int{0}
	for a := 2; a < l.Dim(); a++ {
		perm = append(perm, a)
	}
	perm = append(perm, 1)
	t := l.Permute(perm...)
	defer t.Release()
	return t.Reshape(-1, l.Size(1))
}

// unrows is the inverse of rowsOf: it returns the [M, C] gradient d with the
// logits' shape.
func unrows(d *tensor.Tensor, shape tensor.Shape) *tensor.Tensor {
	if len(shape) <= 2 {
		return d.Reshape(shape...)
	}
	moved := append(tensor.Shape{shape[0]}, shape[2:]...)
	moved = append(moved, shape[1])
	t := d.Reshape(moved...)
	defer t.Release()
	perm := []int{0, len(shape) - 1}
	for a := 1; a < len(shape)-1; a++ {
		perm = append(perm, a)
	}
	v := t.Permute(perm...)
	defer v.Release()
	return v.Contiguous()
}

// countNotIgnored returns, as a scalar of dtype dt, how many targets differ
// from ignore.
func countNotIgnored(tgt *tensor.Tensor, ignore int64, dt tensor.DType) *tensor.Tensor {
	ig := tensor.Scalar(float64(ignore), tensor.Of(tgt.DType()), tensor.On(tgt.Device()))
	defer ig.Release()
	keep := tgt.Ne(ig)
	defer keep.Release()
	kf := keep.Cast(dt)
	defer kf.Release()
	return kf.Sum()
}

// broadcastRows returns the scalar s repeated m times, contiguous.
func broadcastRows(s *tensor.Tensor, m int) *tensor.Tensor {
	v := s.BroadcastTo(tensor.Shape{m})
	defer v.Release()
	return v.Contiguous()
}

// MSELoss returns the squared error (x − y)², reduced as r says; x and y
// broadcast against each other. With d = x − y:
// ∂L/∂x = 2·d·G (divided by the element count for ReductionMean) and
// ∂L/∂y = −∂L/∂x, each summed back to its operand's shape.
func MSELoss(x, y *Var, r Reduction) *Var {
	d := x.Value.Sub(y.Value)
	defer d.Release()
	var out *tensor.Tensor
	sq := d.Square()
	switch r {
	case ReductionNone:
		out = sq
	case ReductionSum:
		out = sq.Sum()
		sq.Release()
	case ReductionMean:
		out = sq.Mean()
		sq.Release()
	default:
		sq.Release()
		panic(fmt.Sprintf("autograd: MSELoss: unknown reduction %v", r))
	}
	xShape, yShape := x.Value.Shape().Clone(), y.Value.Shape().Clone()
	n := d.NumElements()
	return Record("MSELoss", out, []*Var{x, y}, []*tensor.Tensor{d},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			d := ctx.Saved[0]
			scale := 2.0
			if r == ReductionMean {
				scale /= float64(n)
			}
			gd := d.Mul(g)
			gd.MulScalarInPlace(scale)
			defer gd.Release()
			var gx, gy *tensor.Tensor
			if ctx.Needs(0) {
				gx = gd.SumTo(xShape)
			}
			if ctx.Needs(1) {
				t := gd.SumTo(yShape)
				gy = t.Neg()
				t.Release()
			}
			return []*tensor.Tensor{gx, gy}
		})
}
