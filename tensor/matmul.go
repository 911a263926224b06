package tensor

import (
	"fmt"
	"slices"

	"github.com/flockml/flock/backend"
)

// MatMul returns the matrix product of a and b with torch.matmul's rules:
//
//   - 1-D·1-D is the dot product (a scalar);
//   - a 1-D a is a row vector [1, K] and a 1-D b a column vector [K, 1], and
//     the added axis is removed from the result;
//   - operands of rank ≥ 2 are batches of matrices over their last two axes,
//     and the batch axes broadcast under NumPy's rules: [..., M, K]·[..., K, N]
//     → [broadcast batch..., M, N].
//
// Transposed views (t.T(), t.Transpose(-1, -2)) are passed to the kernel as
// transposes, without a copy; other layouts whose rows are not contiguous are
// copied first.
func MatMul(a, b *Tensor) *Tensor {
	const op = "MatMul"
	matmulChecks(op, a, b)
	if a.Dim() == 0 || b.Dim() == 0 {
		panic(fmt.Sprintf("tensor: MatMul: operands of shapes %v and %v; both need at least one axis (use Mul for scalars)", a.shape, b.shape))
	}
	ka, kb := a.shape[a.Dim()-1], b.shape[max(0, b.Dim()-2)]
	if ka != kb {
		panic(fmt.Sprintf("tensor: MatMul: shapes %v and %v do not chain: a has %d columns but b has %d rows; fix the inner sizes or transpose an operand",
			a.shape, b.shape, ka, kb))
	}
	av, bv := a.Retain(), b.Retain()
	if a.Dim() == 1 {
		av.Release()
		av = a.Unsqueeze(0)
	}
	if b.Dim() == 1 {
		bv.Release()
		bv = b.Unsqueeze(1)
	}
	defer av.Release()
	defer bv.Release()
	out := matmul(op, av, bv)
	if a.Dim() > 1 && b.Dim() > 1 {
		return out
	}
	defer out.Release()
	r := out.Dim()
	shape := out.shape.Clone()
	if b.Dim() == 1 {
		shape = shape[:r-1]
	}
	if a.Dim() == 1 {
		shape = slices.Delete(shape, r-2, r-1)
	}
	return out.Reshape(shape...)
}

// MatMulTrans returns op(a)·op(b), where op transposes the last two axes of
// its operand when the flag is set: MatMulTrans(a, b, false, true) is a·bᵀ.
// Both operands have rank ≥ 2; batch axes broadcast as in MatMul.
func MatMulTrans(a, b *Tensor, transA, transB bool) *Tensor {
	const op = "MatMulTrans"
	matmulChecks(op, a, b)
	if a.Dim() < 2 || b.Dim() < 2 {
		panic(fmt.Sprintf("tensor: MatMulTrans: operands of shapes %v and %v; both need at least two axes (use MatMul for vectors)", a.shape, b.shape))
	}
	av, bv := a.Retain(), b.Retain()
	if transA {
		av.Release()
		av = a.Transpose(-1, -2)
	}
	if transB {
		bv.Release()
		bv = b.Transpose(-1, -2)
	}
	defer av.Release()
	defer bv.Release()
	if k, kb := av.shape[av.Dim()-1], bv.shape[bv.Dim()-2]; k != kb {
		panic(fmt.Sprintf("tensor: MatMulTrans: op(a) of %v (transA %v) has %d columns but op(b) of %v (transB %v) has %d rows; fix the inner sizes or the flags",
			a.shape, transA, k, b.shape, transB, kb))
	}
	return matmul(op, av, bv)
}

// Linear returns x·wᵀ + bias for x [..., in], w [out, in] and bias [out]
// (or nil): the affine map of torch.nn.functional.linear, [..., out].
func Linear(x, w, bias *Tensor) *Tensor {
	const op = "Linear"
	ts := []*Tensor{x, w}
	if bias != nil {
		ts = append(ts, bias)
	}
	matmulChecks(op, ts...)
	if x.Dim() < 1 || w.Dim() != 2 || x.shape[x.Dim()-1] != w.shape[1] {
		panic(fmt.Sprintf("tensor: Linear: x %v and w %v: want x [..., in] and w [out, in] with equal in", x.shape, w.shape))
	}
	nOut, nIn := w.shape[0], w.shape[1]
	if bias != nil && (bias.Dim() != 1 || bias.shape[0] != nOut) {
		panic(fmt.Sprintf("tensor: Linear: bias %v for w %v: want bias [%d] (or nil)", bias.shape, w.shape, nOut))
	}
	rows := x.shape[:x.Dim()-1].NumElements()
	x2 := x.Reshape(rows, nIn)
	defer x2.Release()
	wt := w.T()
	defer wt.Release()
	y := empty(x.Device(), x.dtype, Shape{rows, nOut})
	defer y.Release()
	beta := 0.0
	if bias != nil {
		y.CopyFrom(bias)
		beta = 1
	}
	matmulInto(op, y, x2, wt, 1, beta)
	shape := append(x.shape[:x.Dim()-1].Clone(), nOut)
	return y.Reshape(shape...)
}

func matmulChecks(op string, ts ...*Tensor) {
	sameDevice(op, ts...)
	sameDType(op, ts...)
	floatOnly(op, ts...)
}

// matmul is the batched product of a [..., M, K] and b [..., K, N] (both of
// rank ≥ 2, inner sizes already checked) into a new tensor.
func matmul(op string, a, b *Tensor) *Tensor {
	ra, rb := a.Dim(), b.Dim()
	m, n := a.shape[ra-2], b.shape[rb-1]
	batch, err := backend.BroadcastShapes(a.shape[:ra-2], b.shape[:rb-2])
	if err != nil {
		panic(fmt.Sprintf("tensor: %s: batch axes of %v and %v do not broadcast; give them equal extents or extent 1", op, a.shape, b.shape))
	}
	out := empty(a.Device(), a.dtype, append(batch.Clone(), m, n))
	if rb == 2 && ra > 2 {
		// A batch of rows times one matrix is one taller product when the
		// batch of a folds into its rows without a copy.
		if st, ok := viewStrides(a, Shape{batch.NumElements() * m, a.shape[ra-1]}); ok && innerRowMajor(Shape{batch.NumElements() * m, a.shape[ra-1]}, st) {
			a2 := a.view(Shape{batch.NumElements() * m, a.shape[ra-1]}, st, a.offset)
			defer a2.Release()
			o2 := out.view(Shape{batch.NumElements() * m, n}, backend.ContiguousStrides(Shape{batch.NumElements() * m, n}), 0)
			defer o2.Release()
			matmulInto(op, o2, a2, b, 1, 0)
			return out
		}
	}
	matmulInto(op, out, a, b, 1, 0)
	return out
}

// matmulInto sets dst = α·a·b + β·dst, where dst is contiguous
// [batch..., M, N] and a [..., M, K] and b [..., K, N] broadcast to its batch.
func matmulInto(op string, dst, a, b *Tensor, alpha, beta float64) {
	av, ta := kernelOperand(a)
	defer av.Release()
	bv, tb := kernelOperand(b)
	defer bv.Release()
	batch := dst.shape[:dst.Dim()-2]
	ae := av.BroadcastTo(append(batch.Clone(), av.shape[av.Dim()-2:]...))
	defer ae.Release()
	be := bv.BroadcastTo(append(batch.Clone(), bv.shape[bv.Dim()-2:]...))
	defer be.Release()
	p := backend.MatMulParams{TransA: ta, TransB: tb, Alpha: alpha, Beta: beta}
	must(op, dst.Device().MatMul(dst.Raw(), ae.Raw(), be.Raw(), p), a, b)
	addFLOPs(dst.shape.NumElements() * a.shape[a.Dim()-1])
}

// kernelOperand presents a matrix (batch) to the MatMul kernel: t itself
// when its rows are contiguous, its transpose with the flag set when its
// columns are, and a contiguous copy otherwise.
func kernelOperand(t *Tensor) (*Tensor, bool) {
	if innerRowMajor(t.shape, t.strides) {
		return t.Retain(), false
	}
	r := t.Dim()
	tt := t.Transpose(r-1, r-2)
	if innerRowMajor(tt.shape, tt.strides) {
		return tt, true
	}
	tt.Release()
	return t.Contiguous(), false
}

// innerRowMajor reports whether the last two axes of a layout are rows of
// unit stride that do not overlap, as the MatMul kernel requires.
func innerRowMajor(shape Shape, strides []int) bool {
	r := len(shape)
	rows, cols := shape[r-2], shape[r-1]
	if cols > 1 && strides[r-1] != 1 {
		return false
	}
	return rows <= 1 || cols == 0 || strides[r-2] >= max(cols, 1)
}
