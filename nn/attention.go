package nn

import (
	"fmt"
	"math"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// AttentionOptions are the settings of a MultiheadAttention. Zero values
// mean PyTorch's defaults: no dropout, with biases.
type AttentionOptions struct {
	// Dropout is the probability of dropping an attention weight in
	// training mode.
	Dropout float64
	// NoBias leaves out the input and output projection biases.
	NoBias bool
}

// MultiheadAttention is batch-first multi-head self-attention (Vaswani et
// al., 2017) on x [B, T, D] with H heads of size d = D/H:
//
//	[Q K V] = x·W_inᵀ + b_in                      (fused projection, [B, T, 3D])
//	A_h = softmax(Q_h·K_hᵀ/√d + M)                (per head, [B, T, T])
//	y = concat_h(dropout(A_h)·V_h)·W_outᵀ + b_out
//
// with M an optional additive mask. Parameter names follow PyTorch's
// nn.MultiheadAttention: "in_proj_weight" [3D, D], "in_proj_bias" [3D],
// "out_proj.weight" [D, D] and "out_proj.bias" [D].
type MultiheadAttention struct {
	Base
	Dim, Heads int
	// Dropout is the drop probability of attention weights in training.
	Dropout float64
	// Generator supplies the dropout masks.
	Generator *tensor.Generator

	InProjWeight *autograd.Var // [3D, D]
	InProjBias   *autograd.Var // [3D]; nil without bias
	OutProj      *Linear
}

// NewMultiheadAttention returns a MultiheadAttention over dim features with
// the given number of heads (which must divide dim), initialised as
// PyTorch's: W_in by XavierUniform, W_out as a Linear, biases zero. g
// draws the initial weights and, later, the dropout masks. opts choose the
// parameters' dtype and device.
func NewMultiheadAttention(dim, heads int, opt AttentionOptions, g *tensor.Generator, opts ...tensor.Option) *MultiheadAttention {
	if dim <= 0 || heads <= 0 || dim%heads != 0 {
		panic(fmt.Sprintf("nn: NewMultiheadAttention(%d, %d): the heads must divide the dimension", dim, heads))
	}
	if !(opt.Dropout >= 0 && opt.Dropout < 1) {
		panic(fmt.Sprintf("nn: NewMultiheadAttention: dropout %v not in [0, 1)", opt.Dropout))
	}
	m := &MultiheadAttention{Dim: dim, Heads: heads, Dropout: opt.Dropout, Generator: g}
	w := tensor.Empty(tensor.Shape{3 * dim, dim}, opts...)
	XavierUniform(w, 1, g)
	m.InProjWeight = m.RegisterParameter("in_proj_weight", autograd.Param(w))
	if !opt.NoBias {
		m.InProjBias = m.RegisterParameter("in_proj_bias", autograd.Param(tensor.Zeros(tensor.Shape{3 * dim}, opts...)))
	}
	m.OutProj = NewLinear(dim, dim, !opt.NoBias, g, opts...)
	if m.OutProj.Bias != nil {
		Zeros(m.OutProj.Bias.Value)
	}
	m.RegisterModule("out_proj", m.OutProj)
	return m
}

// Forward is self-attention of x [B, T, D] without a mask.
func (m *MultiheadAttention) Forward(x *autograd.Var) *autograd.Var { return m.Attend(x, nil) }

// Attend is self-attention of x [B, T, D] with an optional mask of shape
// [T, T] (shared by all sequences and heads) or [B·H, T, T] (sequence b,
// head h at index b·H + h), as PyTorch's attn_mask: a Bool mask is true
// where attention is not allowed; a float mask is added to the scores.
func (m *MultiheadAttention) Attend(x *autograd.Var, mask *tensor.Tensor) *autograd.Var {
	xs := x.Value.Shape()
	if len(xs) != 3 || xs[2] != m.Dim {
		panic(fmt.Sprintf("nn: MultiheadAttention(%d): input of shape %v; want [B, T, %d]", m.Dim, xs, m.Dim))
	}
	b, t, d, h := xs[0], xs[1], m.Dim, m.Heads
	hd := d / h

	var add *autograd.Var
	if mask != nil {
		add = autograd.Const(attentionMask(mask, x.Value, b, h, t))
		defer add.Release()
	}

	qkv := autograd.Linear(x, m.InProjWeight, m.InProjBias)
	parts := autograd.Split(qkv, -1, d, d, d)
	qkv.Release()
	// split turns [B, T, D] into the heads' [B, H, T, d].
	split := func(v *autograd.Var) *autograd.Var {
		r := autograd.Reshape(v, b, t, h, hd)
		v.Release()
		p := autograd.Permute(r, 0, 2, 1, 3)
		r.Release()
		return p
	}
	q, k, v := split(parts[0]), split(parts[1]), split(parts[2])
	defer v.Release()

	qs := autograd.MulScalar(q, 1/math.Sqrt(float64(hd)))
	q.Release()
	kt := autograd.Transpose(k, -2, -1)
	k.Release()
	scores := autograd.MatMul(qs, kt) // [B, H, T, T]
	qs.Release()
	kt.Release()
	if add != nil {
		s := autograd.Add(scores, add)
		scores.Release()
		scores = s
	}
	attn := autograd.Softmax(scores, -1)
	scores.Release()
	dropped := dropout(attn, m.Dropout, m.Training(), m.Generator)
	attn.Release()
	o := autograd.MatMul(dropped, v) // [B, H, T, d]
	dropped.Release()
	op := autograd.Permute(o, 0, 2, 1, 3)
	o.Release()
	merged := autograd.Reshape(op, b, t, d)
	op.Release()
	defer merged.Release()
	return m.OutProj.Forward(merged)
}

// attentionMask returns the additive mask, broadcastable to [B, H, T, T],
// in x's dtype and on its device.
func attentionMask(mask, x *tensor.Tensor, b, h, t int) *tensor.Tensor {
	ms := mask.Shape()
	var shaped *tensor.Tensor
	switch {
	case ms.Equal(tensor.Shape{t, t}):
		shaped = mask.Retain()
	case ms.Equal(tensor.Shape{b * h, t, t}):
		shaped = mask.Reshape(b, h, t, t)
	default:
		panic(fmt.Sprintf("nn: MultiheadAttention: mask of shape %v; want [%d %d] or [%d %d %d]", ms, t, t, b*h, t, t))
	}
	defer shaped.Release()
	switch mask.DType() {
	case tensor.Bool:
		ninf := tensor.Scalar(math.Inf(-1), tensor.Of(x.DType()), tensor.On(x.Device()))
		defer ninf.Release()
		zero := tensor.Scalar(0, tensor.Of(x.DType()), tensor.On(x.Device()))
		defer zero.Release()
		return tensor.Where(shaped, ninf, zero)
	case tensor.Float32, tensor.Float64:
		return shaped.Cast(x.DType())
	}
	panic(fmt.Sprintf("nn: MultiheadAttention: mask of dtype %v; want bool or float", mask.DType()))
}
