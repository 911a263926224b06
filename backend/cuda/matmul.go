package cuda

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// mat is one operand of a row-major batched product: a device address, its
// dtype, row and column strides and batch stride, in elements.
type mat struct {
	ptr        uintptr
	dt         backend.DType
	rs, cs, bs int
}

// gemm computes, for batch products, C = α·op(A)·op(B) + β·C in row-major
// terms (C is m×n, op(A) m×k, op(B) k×n; a transposed operand is stored
// k×m or n×k). It goes to cuBLAS when present (float32 compute, TF32 by
// option; float64 compute for float64), otherwise to gemm.cu.
func (b *Backend) gemm(transA, transB bool, m, n, k int, alpha float64, A, B mat, beta float64, C mat, batch int) error {
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	if b.useBLAS() && A.cs == 1 && B.cs == 1 && C.cs == 1 {
		at, _ := cudaDataType(A.dt)
		bt, _ := cudaDataType(B.dt)
		ct, _ := cudaDataType(C.dt)
		leave, err := b.eng.enter()
		if err != nil {
			return err
		}
		defer leave()
		// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and
		// a row-major matrix read column-major is its transpose.
		return b.blas.gemm(transB, transA, n, m, k, alpha,
			gemmOperand{ptr: B.ptr, dtype: bt, ld: B.rs, stride: B.bs},
			gemmOperand{ptr: A.ptr, dtype: at, ld: A.rs, stride: A.bs},
			beta, gemmOperand{ptr: C.ptr, dtype: ct, ld: C.rs, stride: C.bs}, batch)
	}
	if A.dt != C.dt || B.dt != C.dt || (C.dt != backend.Float32 && C.dt != backend.Float64) {
		return fmt.Errorf("cuda: matmul of %v·%v into %v needs cuBLAS: %w", A.dt, B.dt, C.dt, backend.ErrUnimplemented)
	}
	// Logical strides of op(A) (m×k) and op(B) (k×n).
	ars, acs := A.rs, A.cs
	if transA {
		ars, acs = A.cs, A.rs
	}
	brs, bcs := B.rs, B.cs
	if transB {
		brs, bcs = B.cs, B.rs
	}
	tiles := ((m + 15) / 16) * ((n + 15) / 16)
	a := new(Args)
	a.Ptr(C.ptr).Ptr(A.ptr).Ptr(B.ptr).I64(int64(m)).I64(int64(n)).I64(int64(k)).
		I64(int64(ars)).I64(int64(acs)).I64(int64(brs)).I64(int64(bcs)).I64(int64(C.rs)).
		I64(int64(A.bs)).I64(int64(B.bs)).I64(int64(C.bs)).F64(alpha).F64(beta)
	return b.eng.launch("gemm", "gemm_"+typeTag(C.dt), batch*tiles, 256, 0, a)
}

func (b *Backend) useBLAS() bool {
	return b.blas != nil && !b.Options().NoCUBLAS
}

// matOperand describes the two inner axes of v as a row-major matrix for
// cuBLAS: column stride 1 and a row stride of at least the row length (any
// stride along an axis of extent 1 is replaced by a valid one).
func matOperand(v backend.View) (rs, cs int, ok bool) {
	r := len(v.Shape)
	rows, cols := v.Shape[r-2], v.Shape[r-1]
	rs, cs = v.Strides[r-2], v.Strides[r-1]
	if cols == 1 {
		cs = 1
	}
	if rows == 1 {
		rs = max(cols, 1)
	}
	return rs, cs, cs == 1 && rs >= max(cols, 1)
}

// rowsContiguous reports whether each matrix of v (its last two axes) has
// contiguous rows, none overlapping the next: the operands the CPU backend
// accepts. Empty matrices and single rows qualify whatever their strides.
func rowsContiguous(v backend.View) bool {
	r := len(v.Shape)
	rows, cols := v.Shape[r-2], v.Shape[r-1]
	if cols > 1 && v.Strides[r-1] != 1 {
		return false
	}
	return rows <= 1 || cols == 0 || v.Strides[r-2] >= cols
}

// MatMul implements backend.Backend for Float32 and Float64 (and, through
// cuBLAS, BFloat16 and Float16 operands with float32 accumulation). With
// Options.Autocast set, float32 operands are rounded to that type first.
// Batch axes of any strides run as strided-batched products.
func (b *Backend) MatMul(dst, x, y backend.View, p backend.MatMulParams) error {
	const k = "matmul"
	for i, v := range []backend.View{dst, x, y} {
		if err := b.checkView(k, []string{"dst", "a", "b"}[i], v); err != nil {
			return err
		}
	}
	r := len(dst.Shape)
	if r < 2 || len(x.Shape) != r || len(y.Shape) != r {
		return fmt.Errorf("cuda: %s: shapes a%v, b%v, dst%v must have equal rank ≥ 2", k, x.Shape, y.Shape, dst.Shape)
	}
	if x.DType != dst.DType || y.DType != dst.DType {
		return fmt.Errorf("cuda: %s: dtypes a %v, b %v, dst %v", k, x.DType, y.DType, dst.DType)
	}
	if _, ok := cudaDataType(dst.DType); !ok {
		return fmt.Errorf("cuda: %s: dtype %v", k, dst.DType)
	}
	m, n := dst.Shape[r-2], dst.Shape[r-1]
	am, ak := x.Shape[r-2], x.Shape[r-1]
	if p.TransA {
		am, ak = ak, am
	}
	bk, bn := y.Shape[r-2], y.Shape[r-1]
	if p.TransB {
		bk, bn = bn, bk
	}
	if am != m || bn != n || ak != bk {
		return fmt.Errorf("cuda: %s: a%v (trans %v) · b%v (trans %v) does not give dst%v", k, x.Shape, p.TransA, y.Shape, p.TransB, dst.Shape)
	}
	kk := ak
	batchShape := dst.Shape[:r-2]
	if !backend.Shape(x.Shape[:r-2]).Equal(batchShape) || !backend.Shape(y.Shape[:r-2]).Equal(batchShape) {
		return fmt.Errorf("cuda: %s: batch shapes a%v, b%v, dst%v differ", k, x.Shape, y.Shape, dst.Shape)
	}
	// The CPU backend's rules: each matrix's rows contiguous and apart
	// (transposition is TransA and TransB, not a view's strides), and no
	// two products writing the same dst.
	for i, v := range []backend.View{dst, x, y} {
		if !rowsContiguous(v) {
			return fmt.Errorf("cuda: %s: %s (shape %v, strides %v) needs contiguous rows (unit column stride, row stride ≥ row length)", k, []string{"dst", "a", "b"}[i], v.Shape, v.Strides)
		}
	}
	for i, d := range batchShape {
		if d > 1 && dst.Strides[i] == 0 {
			return fmt.Errorf("cuda: %s: dst%v broadcasts batch axis %d", k, dst.Shape, i)
		}
	}
	if dst.NumElements() == 0 {
		return nil
	}
	if kk == 0 {
		if p.Beta == 0 {
			return b.Fill(dst, 0)
		}
		return b.Unary(backend.MulScalar, dst, dst, p.Beta)
	}
	// Operands that cuBLAS cannot address are copied to contiguous memory.
	var releases []func()
	defer func() {
		for _, f := range releases {
			f()
		}
	}()
	prepare := func(v backend.View, autocast backend.DType) (backend.View, error) {
		_, _, ok := matOperand(v)
		if ok && (autocast == backend.Invalid || autocast == v.DType) {
			return v, nil
		}
		dt := v.DType
		if autocast != backend.Invalid {
			dt = autocast
		}
		tmp, release, err := b.scratchView(dt, v.Shape)
		if err != nil {
			return v, err
		}
		releases = append(releases, release)
		return tmp, b.Copy(tmp, v)
	}
	cast := backend.Invalid
	if o := b.Options(); o.Autocast != backend.Invalid && dst.DType == backend.Float32 && b.useBLAS() {
		cast = o.Autocast
	}
	var err error
	if x, err = prepare(x, cast); err != nil {
		return err
	}
	if y, err = prepare(y, cast); err != nil {
		return err
	}
	if dst.DType != backend.Float32 && dst.DType != backend.Float64 && !b.useBLAS() {
		return fmt.Errorf("cuda: %s: %v needs cuBLAS: %w", k, dst.DType, backend.ErrUnimplemented)
	}
	bv := func(v backend.View) backend.View {
		return backend.View{Strides: v.Strides[:r-2]}
	}
	bl, err := coalesce(batchShape, bv(dst), bv(x), bv(y))
	if err != nil {
		return err
	}
	// The innermost batch axis is one strided-batched call; outer ones loop.
	last := len(bl.shape) - 1
	batch := int(bl.shape[last])
	outer := 1
	for _, e := range bl.shape[:last] {
		outer *= int(e)
	}
	A, B, C := b.matOf(x), b.matOf(y), b.matOf(dst)
	A.bs, B.bs, C.bs = int(bl.strides[1][last]), int(bl.strides[2][last]), int(bl.strides[0][last])
	idx := make([]int, last)
	for o := 0; o < outer; o++ {
		a, bb, c := A, B, C
		for d, i := range idx {
			a.ptr += uintptr(i * int(bl.strides[1][d]) * x.DType.Size())
			bb.ptr += uintptr(i * int(bl.strides[2][d]) * y.DType.Size())
			c.ptr += uintptr(i * int(bl.strides[0][d]) * dst.DType.Size())
		}
		if err := b.gemm(p.TransA, p.TransB, m, n, kk, p.Alpha, a, bb, p.Beta, c, batch); err != nil {
			return err
		}
		for d := last - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < int(bl.shape[d]) {
				break
			}
			idx[d] = 0
		}
	}
	return nil
}

// matOf describes the inner two axes of a checked view.
func (b *Backend) matOf(v backend.View) mat {
	rs, cs, _ := matOperand(v)
	return mat{ptr: b.ptr(v), dt: v.DType, rs: rs, cs: cs}
}
