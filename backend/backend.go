package backend

import "errors"

// ErrUnimplemented is returned (possibly wrapped) by a kernel that a backend
// does not provide. Callers test for it with errors.Is; tensor falls back to
// a composition of other kernels for the optional kernels the package
// documentation lists, and panics for the others.
var ErrUnimplemented = errors.New("backend: kernel not implemented")

// ErrOutOfMemory is matched (errors.Is) by a device's failure to allocate
// memory, whichever the device.
var ErrOutOfMemory = errors.New("out of device memory")

// Buffer is a block of memory owned by a Backend. Its contents are reached only
// through that backend's methods (or, for host memory, through HostBuffer).
type Buffer interface {
	// Backend is the device that owns the memory.
	Backend() Backend
	// Size is the capacity in bytes.
	Size() int
}

// HostBuffer is implemented by buffers that live in host memory, so callers
// can read and write them without a copy.
type HostBuffer interface {
	Buffer
	// Bytes returns the buffer's memory. It stays valid until the buffer is
	// freed.
	Bytes() []byte
}

// View describes a strided array inside a Buffer: element (i0, i1, ...) lives
// at element index Offset + Σ ik·Strides[k], counted in units of DType.Size().
// A stride may be 0 (a broadcast axis). Strides are never negative.
type View struct {
	Buf     Buffer
	DType   DType
	Shape   Shape
	Strides []int
	Offset  int
}

// Contiguous returns a row-major view of shape s over the start of buf.
func Contiguous(buf Buffer, dt DType, s Shape) View {
	return View{Buf: buf, DType: dt, Shape: s, Strides: ContiguousStrides(s)}
}

// NumElements is the number of elements the view addresses.
func (v View) NumElements() int { return v.Shape.NumElements() }

// IsContiguous reports whether the view is row-major with no gaps, so that
// its elements are the range [Offset, Offset+NumElements()) of the buffer.
// Axes of extent 1 may carry any stride.
func (v View) IsContiguous() bool {
	acc := 1
	for i := len(v.Shape) - 1; i >= 0; i-- {
		if v.Shape[i] != 1 && v.Strides[i] != acc {
			return false
		}
		acc *= v.Shape[i]
	}
	return true
}

// IsZero reports whether v addresses no buffer: the way optional arguments
// (a missing bias, no running statistics) are passed to kernels.
func (v View) IsZero() bool { return v.Buf == nil }

// UnaryOp names an elementwise function of one argument.
type UnaryOp uint8

// Unary operations. Where an op takes a parameter, Unary's arg supplies it.
const (
	Neg        UnaryOp = iota
	Exp                // e^x
	Log                // natural logarithm
	Sqrt               //
	Rsqrt              // 1/√x
	Tanh               //
	Sigmoid            // 1/(1+e^-x)
	ReLU               // max(x, 0)
	GELU               // x·Φ(x) = x/2·(1+erf(x/√2)), PyTorch's approximate='none'
	GELUTanh           // x/2·(1+tanh(√(2/π)·(x+0.044715x³))), approximate='tanh'
	Abs                //
	Sign               // -1, 0 or 1
	Erf                //
	Reciprocal         // 1/x
	Square             // x²
	PowScalar          // x^arg
	AddScalar          // x+arg
	MulScalar          // x·arg
	numUnaryOps
)

// BinaryOp names an elementwise function of two arguments.
type BinaryOp uint8

// Binary operations. The comparisons write Bool results.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Maximum
	Minimum
	Pow // a^b
	Eq
	Ne
	Lt
	Le
	Gt
	Ge
	// The gradients of activations: a is the gradient of the output and b
	// the tensor the forward pass saved. Floats only; a backend without one
	// returns ErrUnimplemented and tensor composes it from other ops.
	ReLUGrad     // a where b > 0, else 0 (b the input or the output of ReLU); PyTorch's threshold_backward
	GELUGrad     // a·(Φ(b) + b·φ(b)), b the input of GELU, φ the standard normal density
	GELUTanhGrad // a·d/db GELUTanh(b), b the input of GELUTanh
	TanhGrad     // a·(1 − b²), b the output of Tanh
	SigmoidGrad  // a·b·(1 − b), b the output of Sigmoid
	numBinaryOps
)

// IsComparison reports whether op yields Bool.
func (op BinaryOp) IsComparison() bool { return op >= Eq && op <= Ge }

// IsActivationGrad reports whether op is the gradient of an activation
// (ReLUGrad … SigmoidGrad).
func (op BinaryOp) IsActivationGrad() bool { return op >= ReLUGrad && op <= SigmoidGrad }

// ReduceOp names a reduction over axes.
type ReduceOp uint8

// Reductions. ArgMax and ArgMin reduce exactly one axis and write Int64
// indices (the first index on ties, like PyTorch). Var is the variance with
// Bessel's correction given by ReduceParams.Correction (0 population, 1 sample).
const (
	Sum ReduceOp = iota
	Mean
	Max
	Min
	ArgMax
	ArgMin
	Var
	numReduceOps
)

// ReduceParams carries the settings of a reduction.
type ReduceParams struct {
	// Correction is subtracted from the count in Var's denominator.
	Correction int
}

// MatMulParams are the settings of a (batched) matrix product
// C = α·op(A)·op(B) + β·C.
type MatMulParams struct {
	TransA, TransB bool
	Alpha, Beta    float64
}

// ConvParams are the settings of a 2-D convolution (cross-correlation, as in
// every deep-learning framework).
type ConvParams struct {
	StrideH, StrideW     int
	PadH, PadW           int
	DilationH, DilationW int
	Groups               int
}

// OutputSize returns the spatial output size of a convolution of an h×w input
// with a kh×kw kernel: ⌊(h + 2p − d·(k−1) − 1)/s⌋ + 1 on each axis. A result
// below 1 means the kernel does not fit in the padded input.
func (p ConvParams) OutputSize(h, w, kh, kw int) (oh, ow int) {
	oh = floorDiv(h+2*p.PadH-p.DilationH*(kh-1)-1, p.StrideH) + 1
	ow = floorDiv(w+2*p.PadW-p.DilationW*(kw-1)-1, p.StrideW) + 1
	return oh, ow
}

// floorDiv is ⌊a/b⌋ for b > 0 (Go's / truncates toward zero).
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// PoolOp names a pooling function.
type PoolOp uint8

// Pooling functions.
const (
	MaxPool PoolOp = iota
	AvgPool
)

// PoolParams are the settings of 2-D pooling, with PyTorch's meaning.
type PoolParams struct {
	KernelH, KernelW     int
	StrideH, StrideW     int
	PadH, PadW           int
	DilationH, DilationW int // max pooling only; 1 for average pooling
	CeilMode             bool
	// CountIncludePad counts padded positions in the average's divisor.
	CountIncludePad bool
}

// OutputSize returns the pooled size of an h×w plane, following PyTorch's
// pooling_output_shape (including the ceil-mode rule that a window must start
// inside the input or its left padding).
func (p PoolParams) OutputSize(h, w int) (oh, ow int) {
	return poolOut(h, p.KernelH, p.StrideH, p.PadH, p.DilationH, p.CeilMode),
		poolOut(w, p.KernelW, p.StrideW, p.PadW, p.DilationW, p.CeilMode)
}

func poolOut(in, k, s, pad, d int, ceil bool) int {
	num := in + 2*pad - d*(k-1) - 1
	if ceil {
		num += s - 1
	}
	out := floorDiv(num, s) + 1
	if ceil && (out-1)*s >= in+pad {
		out--
	}
	return out
}

// CrossEntropyParams are the settings of cross-entropy from logits.
type CrossEntropyParams struct {
	// LabelSmoothing ε mixes the one-hot target with the uniform
	// distribution: q = (1−ε)·onehot + ε/C.
	LabelSmoothing float64
	// IgnoreIndex is a target value whose rows contribute zero loss and zero
	// gradient. It is always in force: set it to PyTorch's default, -100,
	// when no class should be ignored (the zero value ignores class 0).
	IgnoreIndex int64
}

// NormParams are the settings of batch and layer normalisation.
type NormParams struct {
	Eps float64
	// Momentum is the weight of the new batch statistic in the running
	// estimate: r ← (1−m)·r + m·batch (PyTorch's convention).
	Momentum float64
	// Training selects batch statistics (and updates running ones when
	// given); otherwise running statistics normalise.
	Training bool
}

// RandomKind names a distribution for Random.
type RandomKind uint8

// Distributions.
const (
	Uniform RandomKind = iota // U[A, B)
	Normal                    // N(mean A, std B)
)

// RandomParams select a distribution and a point in the counter-based stream.
// Element i of the output is a pure function of (Seed, Offset+i), so results
// do not depend on how the work is split between threads or devices. The
// stream is Philox4x32-10 with the counter layout and the conversions to
// uniform and normal values that backend/cpu/random.go documents and
// backendtest checks bit for bit; every backend produces the same numbers.
type RandomParams struct {
	Kind   RandomKind
	A, B   float64
	Seed   uint64
	Offset uint64
}

// Backend is a device: it owns memory and runs kernels on it.
//
// Conventions for the kernels:
//   - dst views are written and are row-major contiguous unless a method says
//     otherwise; a dst may alias an input only where the method says so.
//   - inputs may be any strided view (broadcast axes have stride 0) for
//     Copy, Fill, Unary, Binary, Where, Reduce, Gather, ScatterAdd,
//     IndexSelect and IndexAdd; the heavier kernels (MatMul's inner two axes,
//     convolution, pooling, softmax, cross-entropy, normalisation, dropout)
//     take contiguous inputs.
//   - float kernels accept Float32 and Float64; all operands of one call have
//     the same float dtype unless a parameter says otherwise (indices are
//     Int32 or Int64, masks and conditions Bool).
//   - argument mistakes (mismatched shapes, wrong dtypes) are programmer
//     errors: they return an error naming the kernel; the tensor layer turns
//     them into panics with the user's shapes.
//   - a backend without a kernel returns ErrUnimplemented (which only the
//     activation gradients among the BinaryOps survive; see the package
//     documentation).
type Backend interface {
	// Name is the registry name ("cpu", "cuda:0").
	Name() string

	// Alloc returns a buffer of at least nbytes bytes. Its contents are
	// unspecified.
	Alloc(nbytes int) (Buffer, error)
	// Free returns the buffer's memory to the backend; buf must not be used
	// afterwards.
	Free(buf Buffer)
	// Write copies host bytes into buf starting at byte offset off.
	Write(buf Buffer, off int, src []byte) error
	// Read copies bytes of buf starting at byte offset off into dst.
	Read(dst []byte, buf Buffer, off int) error
	// Synchronize waits for all queued work of the backend to finish.
	Synchronize() error

	// Copy writes src into dst elementwise. dst and src have equal shapes and
	// any strides; dst must not overlap src. When the dtypes differ the values
	// are converted (floats to integers truncate toward zero, to Bool is
	// x ≠ 0). src may live on another backend when one of the two is host
	// memory.
	Copy(dst, src View) error
	// Fill sets every element of dst (any strides) to value, converted to
	// dst's dtype.
	Fill(dst View, value float64) error
	// Random fills dst (contiguous Float32/Float64) from a counter-based
	// generator; see RandomParams.
	Random(dst View, p RandomParams) error

	// Unary sets dst = op(x) (with parameter arg for PowScalar, AddScalar,
	// MulScalar). dst may have any strides (no zero strides) and may be x
	// itself (same buffer, offset and strides).
	Unary(op UnaryOp, dst, x View, arg float64) error
	// Binary sets dst = op(a, b). a and b have dst's shape, broadcasting
	// through zero strides. dst may have any strides (no zero strides) and
	// may be a or b itself. Comparisons write Bool;
	// Add, Sub, Mul, Maximum, Minimum and comparisons also accept Int32 and
	// Int64 operands.
	Binary(op BinaryOp, dst, a, b View) error
	// Where sets dst = cond ? a : b, with cond Bool; all of dst's shape.
	// dst may have any strides (no zero strides) and may be a or b itself.
	Where(dst, cond, a, b View) error
	// Reduce reduces x over axes (sorted, distinct) into dst, whose shape is
	// x's with those axes removed. An empty reduction gives 0 for Sum, NaN
	// for Mean and Var, and an error for Max, Min, ArgMax and ArgMin.
	Reduce(op ReduceOp, dst, x View, axes []int, p ReduceParams) error

	// MatMul computes dst = α·op(a)·op(b) + β·dst over a batch. a is
	// [..., M, K] ([..., K, M] when TransA), b is [..., K, N] ([..., N, K]
	// when TransB), dst is [..., M, N]; the three have equal batch shapes,
	// with any batch strides (0 to broadcast). The last axis of each operand
	// has stride 1 and the second-last a stride ≥ its row length. With
	// β = 0, dst's prior contents are ignored (NaN does not propagate).
	MatMul(dst, a, b View, p MatMulParams) error

	// Conv2d: x [N, C, H, W], w [O, C/groups, KH, KW] → dst [N, O, OH, OW].
	Conv2d(dst, x, w View, p ConvParams) error
	// Conv2dBackwardData: dy [N, O, OH, OW], w → dx [N, C, H, W].
	Conv2dBackwardData(dx, dy, w View, p ConvParams) error
	// Conv2dBackwardWeight: x, dy → dw [O, C/groups, KH, KW].
	Conv2dBackwardWeight(dw, x, dy View, p ConvParams) error

	// Pool2d: x [N, C, H, W] → dst [N, C, OH, OW]. For MaxPool, indices
	// (Int64, dst's shape) receives the flat position h·W+w of each maximum
	// within its input plane, as PyTorch's return_indices does; for AvgPool
	// indices is the zero View.
	Pool2d(op PoolOp, dst, indices, x View, p PoolParams) error
	// Pool2dBackward: dy [N, C, OH, OW] → dx [N, C, H, W] (overwritten).
	Pool2dBackward(op PoolOp, dx, dy, indices View, p PoolParams) error

	// Softmax writes softmax (or log-softmax when log) of x along axis.
	Softmax(dst, x View, axis int, log bool) error
	// SoftmaxBackward writes dx from the forward output y and dy:
	// softmax: dx = y·(dy − Σ dy·y); log-softmax: dx = dy − e^y·Σ dy.
	SoftmaxBackward(dx, y, dy View, axis int, log bool) error

	// CrossEntropy writes the per-row loss of logits [N, C] against
	// integer targets [N] (Int32 or Int64) into loss [N]: −Σ_c q_c·log
	// softmax(logits)_c with q the label-smoothed target. Rows whose target
	// is IgnoreIndex get 0; other targets outside [0, C) are an error.
	CrossEntropy(loss, logits, target View, p CrossEntropyParams) error
	// CrossEntropyBackward writes dlogits [N, C] = dloss[n]·(softmax − q)
	// (zero rows for ignored targets).
	CrossEntropyBackward(dlogits, logits, target, dloss View, p CrossEntropyParams) error

	// BatchNorm normalises x [N, C, ...] per channel C. weight and bias [C]
	// may be zero Views (no affine). In training it uses batch statistics,
	// writes saveMean and saveInvStd [C] (1/√(var+eps), biased variance) and,
	// when runningMean and runningVar are given, updates them in place with
	// the unbiased variance. Otherwise it normalises with the running
	// statistics (saveMean and saveInvStd may then be zero Views).
	BatchNorm(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar View, p NormParams) error
	// BatchNormBackward writes dx, and dweight and dbias when given (not
	// zero). In training mode saveMean and saveInvStd are the batch
	// statistics the forward pass saved; otherwise they are the running mean
	// and 1/√(running var + eps), and dx = weight·saveInvStd·dy.
	BatchNormBackward(dx, dweight, dbias, dy, x, weight, saveMean, saveInvStd View, p NormParams) error
	// LayerNorm normalises each group of the last D elements of x, where D is
	// normSize, writing y, and mean and rstd (one per group; Float32/64).
	// weight and bias [D] may be zero Views.
	LayerNorm(y, mean, rstd, x, weight, bias View, normSize int, eps float64) error
	// LayerNormBackward writes dx, and dweight and dbias when given.
	LayerNormBackward(dx, dweight, dbias, dy, x, weight, mean, rstd View, normSize int) error

	// Dropout sets dst = x·mask/(1−prob) and writes mask (Bool, x's shape),
	// where element i is dropped iff the uniform draw u_i of the
	// counter-based stream (seed, offset+i) satisfies u_i < prob.
	Dropout(dst, mask, x View, prob float64, seed, offset uint64) error

	// Gather: dst[..i..] = x[..index[..i..]..] along axis (torch.gather);
	// index (Int32/Int64) has dst's shape.
	Gather(dst, x, index View, axis int) error
	// ScatterAdd: dst[..index[..i..]..] += src[..i..] along axis, in place
	// (torch.Tensor.scatter_add_). dst may have any strides.
	ScatterAdd(dst, index, src View, axis int) error
	// IndexSelect: dst = x with axis restricted to the entries of the 1-D
	// index (torch.index_select; an embedding lookup on axis 0).
	IndexSelect(dst, x, index View, axis int) error
	// IndexAdd: dst.index_add_(axis, index, src), in place: the backward of
	// IndexSelect.
	IndexAdd(dst, index, src View, axis int) error
}
