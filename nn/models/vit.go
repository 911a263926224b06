package models

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// ViTConfig describes a Vision Transformer (Dosovitskiy et al., "An Image is
// Worth 16x16 Words: Transformers for Image Recognition at Scale", ICLR
// 2021), with the options of timm's VisionTransformer that the paper's
// models use.
type ViTConfig struct {
	// ImageSize is the side of the square input images; PatchSize the side
	// of the square patches, which must divide it.
	ImageSize, PatchSize int
	// InChannels is the number of input channels; NumClasses the number of
	// logits.
	InChannels, NumClasses int
	// Dim is the width (embedding dimension) D, Depth the number of encoder
	// blocks and Heads the number of attention heads, which must divide Dim.
	Dim, Depth, Heads int
	// MLPRatio sets the hidden width of the MLPs to int(Dim·MLPRatio)
	// (timm's mlp_ratio and rounding); zero means 4 unless MLPDim is set.
	MLPRatio float64
	// MLPDim sets the hidden width of the MLPs directly (torchvision's
	// mlp_dim), which a ratio truncated by int() cannot always express
	// (hidden_dim 15, mlp_dim 123); zero means Dim·MLPRatio. At most one
	// of MLPRatio and MLPDim is set.
	MLPDim int
	// Dropout is the drop probability after the position embedding, after
	// the attention's output projection and after both MLP layers in
	// training (torchvision's dropout, timm's pos_drop_rate and
	// proj_drop_rate). The classifier input is not dropped.
	Dropout float64
	// AttnDropout is the drop probability of the attention weights.
	AttnDropout float64
	// DropPath is the stochastic depth rate of the last block (Huang et
	// al., 2016): block i of Depth drops its residual branches per sample
	// with probability DropPath·i/(Depth−1), increasing linearly from 0 as
	// timm's drop_path_rate.
	DropPath float64
	// GlobalPool is "token" (or empty) to classify the class token's
	// output, or "avg" to classify the mean of the patch tokens' outputs,
	// the class token excluded, as timm's global_pool. With "token" the
	// final LayerNorm ("norm") normalises every token before pooling; with
	// "avg" it normalises the pooled vector instead and is named "fc_norm",
	// as in timm.
	GlobalPool string
	// NoClassToken leaves out the class token (timm's class_token=False);
	// it needs GlobalPool "avg". By default the class token exists with
	// either pooling, as in timm, and with "avg" it still takes part in
	// attention.
	NoClassToken bool
}

func (c ViTConfig) mlpRatio() float64 {
	if c.MLPRatio == 0 {
		return 4
	}
	return c.MLPRatio
}

// MLPHidden is the hidden width of the blocks' MLPs: MLPDim, or
// int(Dim·MLPRatio).
func (c ViTConfig) MLPHidden() int {
	if c.MLPDim != 0 {
		return c.MLPDim
	}
	return int(float64(c.Dim) * c.mlpRatio())
}

// NumPatches is the number of patch tokens, (ImageSize/PatchSize)².
func (c ViTConfig) NumPatches() int {
	g := c.ImageSize / c.PatchSize
	return g * g
}

// prefixTokens is the number of tokens before the patches: the class token.
func (c ViTConfig) prefixTokens() int {
	if c.NoClassToken {
		return 0
	}
	return 1
}

// avgPool reports whether the model averages the patch tokens.
func (c ViTConfig) avgPool() bool { return c.GlobalPool == "avg" }

// NumParameters is the number of parameters of the model c describes,
// computed from the sizes alone:
//
//	patch embedding  C·P²·D + D
//	class token      D
//	position emb.    (1 + N)·D
//	each block       2·2D (norms) + 3D²+3D (qkv) + D²+D (proj) + D·M+M + M·D+D (MLP)
//	final norm       2D
//	head             D·K + K
//
// for C input channels, patch side P, N patches, MLP width M and K classes.
func (c ViTConfig) NumParameters() int {
	d, m, k := c.Dim, c.MLPHidden(), c.NumClasses
	n := c.InChannels*c.PatchSize*c.PatchSize*d + d
	n += c.prefixTokens() * d
	n += (c.prefixTokens() + c.NumPatches()) * d
	block := 2*2*d + 3*d*d + 3*d + d*d + d + d*m + m + m*d + d
	n += c.Depth * block
	n += 2 * d
	n += d*k + k
	return n
}

// validate checks c, returning an error that names the problem.
func (c ViTConfig) validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("models: vit: "+format, args...)
	}
	switch {
	case c.ImageSize <= 0 || c.PatchSize <= 0:
		return fail("image size %d and patch size %d must be positive", c.ImageSize, c.PatchSize)
	case c.ImageSize%c.PatchSize != 0:
		return fail("image side %d is not a multiple of the patch size %d", c.ImageSize, c.PatchSize)
	case c.InChannels <= 0 || c.NumClasses <= 0:
		return fail("input channels %d and classes %d must be positive", c.InChannels, c.NumClasses)
	case c.Dim <= 0 || c.Depth <= 0 || c.Heads <= 0:
		return fail("width %d, depth %d and heads %d must be positive", c.Dim, c.Depth, c.Heads)
	case c.Dim%c.Heads != 0:
		return fail("%d heads do not divide the width %d", c.Heads, c.Dim)
	case c.MLPDim != 0 && c.MLPRatio != 0:
		return fail("MLP ratio %v and MLP width %d: set one of them", c.MLPRatio, c.MLPDim)
	case c.MLPDim < 0:
		return fail("MLP width %d: want > 0", c.MLPDim)
	case !(c.MLPRatio >= 0) || c.MLPHidden() <= 0:
		return fail("MLP ratio %v gives no hidden units", c.MLPRatio)
	case !(c.Dropout >= 0 && c.Dropout < 1), !(c.AttnDropout >= 0 && c.AttnDropout < 1), !(c.DropPath >= 0 && c.DropPath < 1):
		return fail("dropout %v, attention dropout %v and drop path %v must be in [0, 1)", c.Dropout, c.AttnDropout, c.DropPath)
	case c.GlobalPool != "" && c.GlobalPool != "token" && c.GlobalPool != "avg":
		return fail("global pool %q; want \"token\" or \"avg\"", c.GlobalPool)
	case c.NoClassToken && !c.avgPool():
		return fail("without a class token the global pool must be \"avg\"")
	}
	return nil
}

// ViT is a Vision Transformer. An image [B, C, S, S] is cut into N patches
// of P×P pixels, each projected to D features by a P×P convolution of
// stride P; a learned class token is prepended and a learned position
// embedding added:
//
//	z₀ = [cls; x_p¹E; …; x_pᴺE] + E_pos                      [B, 1+N, D]
//	z'ₗ = zₗ₋₁ + DropPath(MSA(LN(zₗ₋₁)))                      (pre-norm)
//	zₗ = z'ₗ + DropPath(MLP(LN(z'ₗ)))                         MLP: fc1 → GELU → fc2
//	y = head(LN(z_L)[:, 0])                                  (token pooling)
//	y = head(LN(mean_{i≥1} z_L[:, i]))                       (avg pooling)
//
// with LayerNorm ε = 10⁻⁶ and the exact (erf) GELU. Parameter names are
// timm's: cls_token [1, 1, D], pos_embed [1, 1+N, D],
// patch_embed.proj.{weight,bias}, blocks.{i}.norm1.*, blocks.{i}.attn.qkv.*,
// blocks.{i}.attn.proj.*, blocks.{i}.norm2.*, blocks.{i}.mlp.fc1.*,
// blocks.{i}.mlp.fc2.*, norm.* (fc_norm.* with avg pooling) and head.*, so
// timm checkpoints load as they are and torchvision ones through
// ConvertTorchvisionViT.
type ViT struct {
	nn.Base
	Config ViTConfig

	ClsToken   *autograd.Var // [1, 1, D]; nil without class token
	PosEmbed   *autograd.Var // [1, prefix+N, D]
	PatchEmbed *PatchEmbed
	PosDrop    *nn.Dropout
	Blocks     []*ViTBlock // registered as the Sequential "blocks"
	Norm       *nn.LayerNorm
	FCNorm     *nn.LayerNorm // nil with token pooling; Norm is nil with avg pooling
	Head       *nn.Linear

	blocks *nn.Sequential
}

// NewViT returns the Vision Transformer c describes, initialised as timm's
// (weight_init ""): the position embedding from a normal distribution of
// standard deviation 0.02 truncated to [−2, 2], the class token from
// N(0, 10⁻¹²), every Linear weight from the same truncated normal with zero
// bias, LayerNorms with γ = 1 and β = 0, and the patch projection with
// PyTorch's Conv2d default (U(±1/√fanIn) for weight and bias), which timm
// leaves in place (its "jax" mode uses LeCun normal instead). Every draw
// comes from g, which also supplies the dropout and drop-path masks. opts
// choose the parameters' dtype and device.
func NewViT(c ViTConfig, g *tensor.Generator, opts ...tensor.Option) (*ViT, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("models: vit: nil generator")
	}
	if c.GlobalPool == "" {
		c.GlobalPool = "token"
	}
	d := c.Dim
	m := &ViT{Config: c}

	m.PatchEmbed = newPatchEmbed(c.InChannels, d, c.PatchSize, g, opts...)
	if !c.NoClassToken {
		cls := tensor.Empty(tensor.Shape{1, 1, d}, opts...)
		nn.Normal(cls, 0, 1e-6, g)
		m.ClsToken = m.RegisterParameter("cls_token", autograd.Param(cls))
	}
	pos := tensor.Empty(tensor.Shape{1, c.prefixTokens() + c.NumPatches(), d}, opts...)
	nn.TruncNormal(pos, 0, 0.02, -2, 2, g)
	m.PosEmbed = m.RegisterParameter("pos_embed", autograd.Param(pos))
	m.RegisterModule("patch_embed", m.PatchEmbed)
	m.PosDrop = nn.NewDropout(c.Dropout, g)
	m.RegisterModule("pos_drop", m.PosDrop)

	m.blocks = nn.NewSequential()
	for i := range c.Depth {
		rate := 0.0
		if c.Depth > 1 {
			rate = c.DropPath * float64(i) / float64(c.Depth-1)
		}
		b := newViTBlock(d, c.Heads, c.MLPHidden(), c.Dropout, c.AttnDropout, rate, g, opts...)
		m.blocks.Append(b)
		m.Blocks = append(m.Blocks, b)
	}
	m.RegisterModule("blocks", m.blocks)

	ln := nn.NewLayerNorm(tensor.Shape{d}, nn.LayerNormOptions{Eps: 1e-6}, opts...)
	if c.avgPool() {
		m.FCNorm = ln
		m.RegisterModule("fc_norm", ln)
	} else {
		m.Norm = ln
		m.RegisterModule("norm", ln)
	}
	m.Head = timmLinear(d, c.NumClasses, g, opts...)
	m.RegisterModule("head", m.Head)
	return m, nil
}

// Forward returns the logits [B, NumClasses] of images x [B, C, S, S].
func (m *ViT) Forward(x *autograd.Var) *autograd.Var {
	c := m.Config
	xs := x.Shape()
	if len(xs) != 4 || xs[1] != c.InChannels || xs[2] != c.ImageSize || xs[3] != c.ImageSize {
		panic(fmt.Sprintf("models: ViT: input of shape %v; want [B, %d, %d, %d]", xs, c.InChannels, c.ImageSize, c.ImageSize))
	}
	h := m.PatchEmbed.Forward(x) // [B, N, D]
	if m.ClsToken != nil {
		cls := autograd.Expand(m.ClsToken, xs[0], -1, -1)
		joined := autograd.Concat(1, cls, h)
		cls.Release()
		h.Release()
		h = joined
	}
	h = then(h, func(h *autograd.Var) *autograd.Var { return autograd.Add(h, m.PosEmbed) })
	h = then(h, m.PosDrop.Forward)
	h = then(h, m.blocks.Forward)
	if c.avgPool() {
		h = then(h, func(h *autograd.Var) *autograd.Var {
			return autograd.Slice(h, 1, c.prefixTokens(), h.Shape()[1])
		})
		h = then(h, func(h *autograd.Var) *autograd.Var { return autograd.Mean(h, 1) })
		h = then(h, m.FCNorm.Forward)
	} else {
		h = then(h, m.Norm.Forward)
		h = then(h, func(h *autograd.Var) *autograd.Var { return autograd.Select(h, 1, 0) })
	}
	return then(h, m.Head.Forward)
}

// then returns f(x) and releases x.
func then(x *autograd.Var, f func(*autograd.Var) *autograd.Var) *autograd.Var {
	y := f(x)
	x.Release()
	return y
}

// timmLinear returns a Linear initialised as timm's ViTs do: the weight
// from N(0, 0.02²) truncated to [−2, 2], a zero bias.
func timmLinear(in, out int, g *tensor.Generator, opts ...tensor.Option) *nn.Linear {
	l := &nn.Linear{In: in, Out: out}
	w := tensor.Empty(tensor.Shape{out, in}, opts...)
	nn.TruncNormal(w, 0, 0.02, -2, 2, g)
	l.Weight = l.RegisterParameter("weight", autograd.Param(w))
	l.Bias = l.RegisterParameter("bias", autograd.Param(tensor.Zeros(tensor.Shape{out}, opts...)))
	return l
}

// PatchEmbed cuts images [B, C, S, S] into P×P patches and projects each to
// D features with a P×P convolution of stride P ("proj"), returning the
// tokens [B, (S/P)², D] in row-major patch order.
type PatchEmbed struct {
	nn.Base
	Patch int
	Proj  *nn.Conv2d
}

func newPatchEmbed(in, dim, patch int, g *tensor.Generator, opts ...tensor.Option) *PatchEmbed {
	p := &PatchEmbed{Patch: patch}
	p.Proj = nn.NewConv2d(in, dim, patch, nn.Conv2dOptions{Stride: patch}, g, opts...)
	p.RegisterModule("proj", p.Proj)
	return p
}

// Forward returns the patch tokens of x [B, C, S, S].
func (p *PatchEmbed) Forward(x *autograd.Var) *autograd.Var {
	if s := x.Shape(); len(s) != 4 || s[2]%p.Patch != 0 || s[3]%p.Patch != 0 {
		panic(fmt.Sprintf("models: PatchEmbed: input of shape %v; want [B, C, H, W] with sides divisible by %d", s, p.Patch))
	}
	h := p.Proj.Forward(x)                                                                     // [B, D, S/P, S/P]
	h = then(h, func(h *autograd.Var) *autograd.Var { return autograd.Flatten(h, 2, 3) })      // [B, D, N]
	return then(h, func(h *autograd.Var) *autograd.Var { return autograd.Transpose(h, 1, 2) }) // [B, N, D]
}

// ViTBlock is a pre-norm transformer encoder block:
// x + DropPath(Attn(LN(x))), then x + DropPath(MLP(LN(x))). Its parts are
// named as timm's: norm1, attn, norm2, mlp (drop_path1 and drop_path2 hold
// no parameters).
type ViTBlock struct {
	nn.Base
	Norm1     *nn.LayerNorm
	Attn      *ViTAttention
	DropPath1 *DropPath
	Norm2     *nn.LayerNorm
	MLP       *ViTMLP
	DropPath2 *DropPath
}

func newViTBlock(dim, heads, hidden int, drop, attnDrop, dropPath float64, g *tensor.Generator, opts ...tensor.Option) *ViTBlock {
	ln := nn.LayerNormOptions{Eps: 1e-6}
	b := &ViTBlock{
		Norm1:     nn.NewLayerNorm(tensor.Shape{dim}, ln, opts...),
		Attn:      newViTAttention(dim, heads, drop, attnDrop, g, opts...),
		DropPath1: NewDropPath(dropPath, g),
		Norm2:     nn.NewLayerNorm(tensor.Shape{dim}, ln, opts...),
		MLP:       newViTMLP(dim, hidden, drop, g, opts...),
		DropPath2: NewDropPath(dropPath, g),
	}
	b.RegisterModule("norm1", b.Norm1)
	b.RegisterModule("attn", b.Attn)
	b.RegisterModule("drop_path1", b.DropPath1)
	b.RegisterModule("norm2", b.Norm2)
	b.RegisterModule("mlp", b.MLP)
	b.RegisterModule("drop_path2", b.DropPath2)
	return b
}

// Forward applies the block to tokens x [B, T, D].
func (b *ViTBlock) Forward(x *autograd.Var) *autograd.Var {
	residual := func(x *autograd.Var, norm *nn.LayerNorm, f nn.Layer, dp *DropPath) *autograd.Var {
		h := norm.Forward(x)
		h = then(h, f.Forward)
		h = then(h, dp.Forward)
		y := autograd.Add(x, h)
		h.Release()
		return y
	}
	h := residual(x, b.Norm1, b.Attn, b.DropPath1)
	return then(h, func(h *autograd.Var) *autograd.Var { return residual(h, b.Norm2, b.MLP, b.DropPath2) })
}

// ViTAttention is multi-head self-attention with a fused projection
// "qkv" [3D, D] (rows: the queries, keys and values of heads 0…H−1 in
// turn) and an output projection "proj" [D, D], as timm's Attention:
//
//	A_h = dropout(softmax(Q_h·K_hᵀ/√d))      d = D/H
//	y = dropout(concat_h(A_h·V_h)·W_projᵀ + b_proj)
type ViTAttention struct {
	nn.Base
	Dim, Heads int
	QKV        *nn.Linear
	AttnDrop   *nn.Dropout
	Proj       *nn.Linear
	ProjDrop   *nn.Dropout
}

func newViTAttention(dim, heads int, drop, attnDrop float64, g *tensor.Generator, opts ...tensor.Option) *ViTAttention {
	a := &ViTAttention{
		Dim: dim, Heads: heads,
		QKV:      timmLinear(dim, 3*dim, g, opts...),
		AttnDrop: nn.NewDropout(attnDrop, g),
		Proj:     timmLinear(dim, dim, g, opts...),
		ProjDrop: nn.NewDropout(drop, g),
	}
	a.RegisterModule("qkv", a.QKV)
	a.RegisterModule("attn_drop", a.AttnDrop)
	a.RegisterModule("proj", a.Proj)
	a.RegisterModule("proj_drop", a.ProjDrop)
	return a
}

// Forward is self-attention of x [B, T, D].
func (a *ViTAttention) Forward(x *autograd.Var) *autograd.Var {
	xs := x.Shape()
	if len(xs) != 3 || xs[2] != a.Dim {
		panic(fmt.Sprintf("models: ViTAttention(%d): input of shape %v; want [B, T, %d]", a.Dim, xs, a.Dim))
	}
	b, t, d, h := xs[0], xs[1], a.Dim, a.Heads
	hd := d / h

	qkv := a.QKV.Forward(x) // [B, T, 3D]
	parts := autograd.Split(qkv, -1, d, d, d)
	qkv.Release()
	heads := func(v *autograd.Var) *autograd.Var { // [B, T, D] → [B, H, T, d]
		v = then(v, func(v *autograd.Var) *autograd.Var { return autograd.Reshape(v, b, t, h, hd) })
		return then(v, func(v *autograd.Var) *autograd.Var { return autograd.Permute(v, 0, 2, 1, 3) })
	}
	q, k, v := heads(parts[0]), heads(parts[1]), heads(parts[2])

	q = then(q, func(q *autograd.Var) *autograd.Var { return autograd.MulScalar(q, 1/math.Sqrt(float64(hd))) })
	k = then(k, func(k *autograd.Var) *autograd.Var { return autograd.Transpose(k, -2, -1) })
	s := autograd.MatMul(q, k) // [B, H, T, T]
	q.Release()
	k.Release()
	s = then(s, func(s *autograd.Var) *autograd.Var { return autograd.Softmax(s, -1) })
	s = then(s, a.AttnDrop.Forward)
	o := autograd.MatMul(s, v) // [B, H, T, d]
	s.Release()
	v.Release()
	o = then(o, func(o *autograd.Var) *autograd.Var { return autograd.Permute(o, 0, 2, 1, 3) })
	o = then(o, func(o *autograd.Var) *autograd.Var { return autograd.Reshape(o, b, t, d) })
	o = then(o, a.Proj.Forward)
	return then(o, a.ProjDrop.Forward)
}

// ViTMLP is the block's feed-forward network fc1 → GELU (exact) → dropout
// → fc2 → dropout, named as timm's Mlp (fc1, act, drop1, fc2, drop2).
type ViTMLP struct {
	nn.Base
	FC1   *nn.Linear
	Act   *nn.GELU
	Drop1 *nn.Dropout
	FC2   *nn.Linear
	Drop2 *nn.Dropout
}

func newViTMLP(dim, hidden int, drop float64, g *tensor.Generator, opts ...tensor.Option) *ViTMLP {
	m := &ViTMLP{
		FC1:   timmLinear(dim, hidden, g, opts...),
		Act:   nn.NewGELU(false),
		Drop1: nn.NewDropout(drop, g),
		FC2:   timmLinear(hidden, dim, g, opts...),
		Drop2: nn.NewDropout(drop, g),
	}
	m.RegisterModule("fc1", m.FC1)
	m.RegisterModule("act", m.Act)
	m.RegisterModule("drop1", m.Drop1)
	m.RegisterModule("fc2", m.FC2)
	m.RegisterModule("drop2", m.Drop2)
	return m
}

// Forward applies the MLP to the last axis of x.
func (m *ViTMLP) Forward(x *autograd.Var) *autograd.Var {
	h := m.FC1.Forward(x)
	for _, f := range []func(*autograd.Var) *autograd.Var{m.Act.Forward, m.Drop1.Forward, m.FC2.Forward, m.Drop2.Forward} {
		h = then(h, f)
	}
	return h
}

// DropPath is stochastic depth (Huang et al., "Deep Networks with
// Stochastic Depth", ECCV 2016) as timm's drop_path: in training, each
// sample (index of the first axis) of its input is zeroed with probability
// P and the others are scaled by 1/(1−P), so the expectation is unchanged;
// in evaluation, or with P = 0, it is the identity. The per-sample mask is
// drawn from Generator. It has no parameters.
type DropPath struct {
	nn.Base
	P         float64
	Generator *tensor.Generator
}

// NewDropPath returns a DropPath with drop probability p in [0, 1) drawing
// its masks from g.
func NewDropPath(p float64, g *tensor.Generator) *DropPath {
	if !(p >= 0 && p < 1) {
		panic(fmt.Sprintf("models: NewDropPath(%v): the probability must be in [0, 1)", p))
	}
	if g == nil {
		panic("models: NewDropPath: nil generator")
	}
	return &DropPath{P: p, Generator: g}
}

// Forward returns x with whole samples dropped in training mode, x
// unchanged (a new Var) otherwise.
func (d *DropPath) Forward(x *autograd.Var) *autograd.Var {
	if !d.Training() || d.P == 0 {
		return passThrough(x)
	}
	shape := make(tensor.Shape, x.Value.Dim())
	for i := range shape {
		shape[i] = 1
	}
	shape[0] = x.Value.Size(0)
	ones := tensor.Ones(shape, tensor.Of(x.Value.DType()), tensor.On(x.Value.Device()))
	scale, mask := tensor.Dropout(ones, d.P, d.Generator) // 0 or 1/(1−P) per sample
	ones.Release()
	mask.Release()
	s := autograd.Const(scale)
	defer s.Release()
	return autograd.Mul(x, s)
}

// passThrough returns a Var with x's value (a new reference) through which
// gradients pass unchanged.
func passThrough(x *autograd.Var) *autograd.Var {
	return autograd.Record("Identity", x.Value.Retain(), []*autograd.Var{x}, nil,
		func(_ *autograd.Context, g *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{g.Retain()}
		})
}

// ConvertTorchvisionViT renames the state dict of torchvision's
// VisionTransformer (models.vision_transformer) to the names of ViT
// (timm's):
//
//	class_token                                   → cls_token
//	conv_proj.{weight,bias}                       → patch_embed.proj.*
//	encoder.pos_embedding                         → pos_embed
//	encoder.layers.encoder_layer_{i}.ln_1.*       → blocks.{i}.norm1.*
//	  ….self_attention.in_proj_{weight,bias}      → blocks.{i}.attn.qkv.*
//	  ….self_attention.out_proj.*                 → blocks.{i}.attn.proj.*
//	  ….ln_2.*                                    → blocks.{i}.norm2.*
//	  ….mlp.0.* (….mlp.linear_1.* in older files) → blocks.{i}.mlp.fc1.*
//	  ….mlp.3.* (….mlp.linear_2.*)                → blocks.{i}.mlp.fc2.*
//	encoder.ln.*                                  → norm.*
//	heads.head.*                                  → head.*
//
// The layouts agree (torchvision's in_proj_weight stacks the query, key and
// value projections as timm's qkv does), so the tensors are only renamed:
// the result holds new references to sd's tensors, which the caller
// releases (nn.ReleaseAll). Keys of other parts — a convolutional stem
// (conv_proj.conv_*), a representation layer (heads.pre_logits) — have no
// counterpart and are errors, as are duplicates.
func ConvertTorchvisionViT(sd map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	names := vitNames{torchvisionViTTop, tvLayerPrefix, "blocks.", []map[string]string{torchvisionViTLayer, torchvisionViTLegacy}}
	return renameViT(sd, "convert torchvision ViT", "a ViT", names.rename)
}

// ConvertToTorchvisionViT renames the state dict of a ViT to the names of
// torchvision's VisionTransformer, for exporting: the inverse of
// ConvertTorchvisionViT, writing the MLP's layers as mlp.0 and mlp.3 (the
// names of torchvision 0.14 and later; earlier versions load them too). As
// there, the result holds new references to sd's tensors, which the caller
// releases. A ViT that torchvision cannot express — mean pooling
// (fc_norm.*), no class token — gives an error naming the keys without a
// counterpart or the class token missing; the configuration torchvision
// needs is image_size, patch_size, num_layers, num_heads, hidden_dim
// (Dim), mlp_dim (MLPHidden) and num_classes.
func ConvertToTorchvisionViT(sd map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if _, ok := sd["cls_token"]; !ok && len(sd) > 0 {
		return nil, fmt.Errorf(`models: convert ViT to torchvision: no "cls_token": torchvision's VisionTransformer has a class token`)
	}
	names := vitNames{inverse(torchvisionViTTop), "blocks.", tvLayerPrefix, []map[string]string{inverse(torchvisionViTLayer)}}
	return renameViT(sd, "convert ViT to torchvision", "a torchvision VisionTransformer", names.rename)
}

// vitNames renames a ViT's keys: those of top, and from + "<i>." + part to
// to + "<i>." + layer[part] with the first of layers holding part.
type vitNames struct {
	top      map[string]string
	from, to string
	layers   []map[string]string
}

func (v vitNames) rename(key string) (string, bool) {
	if n, ok := v.top[key]; ok {
		return n, true
	}
	i, part, ok := layerKey(key, v.from)
	if !ok {
		return "", false
	}
	for _, l := range v.layers {
		if n, ok := l[part]; ok {
			return v.to + i + "." + n, true
		}
	}
	return "", false
}

// inverse returns m with keys and values swapped.
func inverse(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

const tvLayerPrefix = "encoder.layers.encoder_layer_"

// The names of torchvision's VisionTransformer and their ViT (timm)
// counterparts: the model's own tensors, those of each encoder layer, and
// the MLP names of torchvision before 0.14.
var (
	torchvisionViTTop = map[string]string{
		"class_token":           "cls_token",
		"conv_proj.weight":      "patch_embed.proj.weight",
		"conv_proj.bias":        "patch_embed.proj.bias",
		"encoder.pos_embedding": "pos_embed",
		"encoder.ln.weight":     "norm.weight",
		"encoder.ln.bias":       "norm.bias",
		"heads.head.weight":     "head.weight",
		"heads.head.bias":       "head.bias",
	}
	torchvisionViTLayer = map[string]string{
		"ln_1.weight":                    "norm1.weight",
		"ln_1.bias":                      "norm1.bias",
		"self_attention.in_proj_weight":  "attn.qkv.weight",
		"self_attention.in_proj_bias":    "attn.qkv.bias",
		"self_attention.out_proj.weight": "attn.proj.weight",
		"self_attention.out_proj.bias":   "attn.proj.bias",
		"ln_2.weight":                    "norm2.weight",
		"ln_2.bias":                      "norm2.bias",
		"mlp.0.weight":                   "mlp.fc1.weight",
		"mlp.0.bias":                     "mlp.fc1.bias",
		"mlp.3.weight":                   "mlp.fc2.weight",
		"mlp.3.bias":                     "mlp.fc2.bias",
	}
	torchvisionViTLegacy = map[string]string{
		"mlp.linear_1.weight": "mlp.fc1.weight",
		"mlp.linear_1.bias":   "mlp.fc1.bias",
		"mlp.linear_2.weight": "mlp.fc2.weight",
		"mlp.linear_2.bias":   "mlp.fc2.bias",
	}
)

// layerKey splits prefix + "<i>.<part>" into the layer index i (a decimal
// number without leading zeros) and part.
func layerKey(key, prefix string) (idx, part string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", "", false
	}
	idx, part, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || strconv.Itoa(i) != idx {
		return "", "", false
	}
	return idx, part, true
}

// renameViT renames every key of sd with rename, which reports keys it
// cannot rename; unknown keys and keys renamed to the same name are errors
// (what names the conversion, target the other side). The result holds new
// references to sd's tensors.
func renameViT(sd map[string]*tensor.Tensor, what, target string, rename func(string) (string, bool)) (map[string]*tensor.Tensor, error) {
	keys := make([]string, 0, len(sd))
	for k := range sd {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]*tensor.Tensor, len(sd))
	from := make(map[string]string, len(sd))
	var unknown, dup []string
	for _, k := range keys {
		n, ok := rename(k)
		switch {
		case !ok:
			unknown = append(unknown, fmt.Sprintf("%q", k))
		case from[n] != "":
			dup = append(dup, fmt.Sprintf("%q and %q", from[n], k))
		default:
			from[n] = k
			out[n] = sd[k]
		}
	}
	var problems []string
	if len(unknown) > 0 {
		problems = append(problems, "keys without "+target+" counterpart "+strings.Join(unknown, ", "))
	}
	if len(dup) > 0 {
		problems = append(problems, "keys naming the same tensor "+strings.Join(dup, ", "))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("models: %s: %s", what, strings.Join(problems, "; "))
	}
	for n, t := range out {
		out[n] = t.Retain()
	}
	return out, nil
}

// vitSizes are the widths of the paper's and DeiT's models: embedding
// dimension, depth, heads.
var vitSizes = []struct {
	name              string
	dim, depth, heads int
}{
	{"tiny", 192, 12, 3},
	{"small", 384, 12, 6},
	{"base", 768, 12, 12},
	{"large", 1024, 24, 16},
}

// vitPatches are the registered patch sides: 16 and 32 for 224×224 images
// (ViT-B/16, ViT-B/32, …), 4 for 32×32 (CIFAR) and 28×28 (MNIST-like)
// images.
var vitPatches = []int{4, 16, 32}

func init() {
	for _, s := range vitSizes {
		for _, p := range vitPatches {
			name := fmt.Sprintf("vit_%s_p%d", s.name, p)
			about := fmt.Sprintf("ViT-%s/%d: width %d, depth %d, %d heads, MLP ×4, class-token pooling (timm names)",
				strings.ToUpper(s.name[:1])+s.name[1:], p, s.dim, s.depth, s.heads)
			register(name, about, func(cfg Config, g *tensor.Generator) (nn.Layer, error) {
				c, err := NamedViT(name, cfg)
				if err != nil {
					return nil, err
				}
				return NewViT(c, g)
			})
		}
	}
}

// NamedViT returns the configuration of the registered ViT name
// ("vit_base_p16", …) for images and classes cfg: image size cfg.Height,
// which must equal cfg.Width and be a multiple of the patch size, no
// dropout, no drop path and class-token pooling (timm's defaults).
func NamedViT(name string, cfg Config) (ViTConfig, error) {
	var size, patch string
	rest, ok := strings.CutPrefix(name, "vit_")
	if ok {
		size, patch, ok = strings.Cut(rest, "_p")
	}
	p, err := strconv.Atoi(patch)
	if !ok || err != nil || !slices.Contains(vitPatches, p) {
		return ViTConfig{}, fmt.Errorf("models: %q is not a ViT name (vit_<size>_p<patch>, patch %v)", name, vitPatches)
	}
	for _, s := range vitSizes {
		if s.name != size {
			continue
		}
		if err := cfg.validate(); err != nil {
			return ViTConfig{}, err
		}
		if cfg.Height != cfg.Width {
			return ViTConfig{}, fmt.Errorf("models: %s: needs square images, got %d×%d", name, cfg.Height, cfg.Width)
		}
		if cfg.Height%p != 0 {
			return ViTConfig{}, fmt.Errorf("models: %s: image side %d is not a multiple of the patch size %d", name, cfg.Height, p)
		}
		c := ViTConfig{
			ImageSize: cfg.Height, PatchSize: p,
			InChannels: cfg.InChannels, NumClasses: cfg.NumClasses,
			Dim: s.dim, Depth: s.depth, Heads: s.heads,
		}
		return c, c.validate()
	}
	return ViTConfig{}, fmt.Errorf("models: %q is not a ViT name (sizes: tiny, small, base, large)", name)
}
