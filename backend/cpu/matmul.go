package cpu

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"unsafe"

	"github.com/flockml/flock/backend"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// Blocking of gemm. A call to the BLAS covers at most gemmMB×gemmNB of C,
// which keeps gonum's Sgemm and Dgemm on their serial path (they go parallel
// from four 64×64 blocks of C on), and about gemmKB of the inner dimension,
// so that the panel of op(B) in use stays in the L2 cache.
const (
	gemmMB = 64
	gemmNB = 128
	gemmKB = 512
	// gemmPackMinM is the least number of rows of C over which packing a
	// panel of op(B) pays for itself.
	gemmPackMinM = 16
)

// gemm computes C = α·op(A)·op(B) + β·C on the calling goroutine, where
// op(A) is m×k, op(B) is k×n and C is m×n, all row-major. A is stored m×k
// with row stride lda, or k×m when transA; B is stored k×n with row stride
// ldb, or n×k when transB; C has row stride ldc. With β = 0 the prior
// contents of C are ignored (NaN does not propagate), and with α = 0 A and B
// are not read.
//
// It is the one matrix-product primitive of the package: the batched MatMul
// and the convolutions call it on independent blocks of their outputs from
// their own goroutines. It calls gonum's BLAS on cache-sized blocks, packed
// so that every call is the form C += A·Bᵀ with both operands' rows
// contiguous: gonum computes that form with dot products, about twice as
// fast as the axpy updates of its other forms.
func gemm[T float32 | float64](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if gemmFast(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	if alpha == 0 || k == 0 {
		scaleMatrix(m, n, beta, c, ldc)
		return
	}
	kBlocks := (k + gemmKB - 1) / gemmKB
	kStep := (k + kBlocks - 1) / kBlocks
	packB := !transB && m >= gemmPackMinM
	// Packed rows are padded past a power-of-two length, whose stride would
	// map the rows written together onto a few cache sets.
	ldp := kStep + 16
	var bPack, aPack *[]T
	if packB {
		bPack = getScratch[T](min(n, gemmNB) * ldp)
		defer putScratch(bPack)
	}
	if transA {
		aPack = getScratch[T](min(m, gemmMB) * ldp)
		defer putScratch(aPack)
	}
	for j0 := 0; j0 < n; j0 += gemmNB {
		nb := min(gemmNB, n-j0)
		for k0 := 0; k0 < k; k0 += kStep {
			kb := min(kStep, k-k0)
			bt := beta
			if k0 > 0 {
				bt = 1
			}
			// op(B)'s panel [k0, k0+kb) × [j0, j0+nb), as rows of Bᵀ when tb.
			var bb []T
			ldbb, tb := ldb, true
			switch {
			case transB:
				bb = b[j0*ldb+k0:]
			case !packB:
				bb, tb = b[k0*ldb+j0:], false
			default:
				p := *bPack
				for kk := range kb {
					row := b[(k0+kk)*ldb+j0 : (k0+kk)*ldb+j0+nb]
					for jj, v := range row {
						p[jj*ldp+kk] = v
					}
				}
				bb, ldbb = p, ldp
			}
			for i0 := 0; i0 < m; i0 += gemmMB {
				mb := min(gemmMB, m-i0)
				var aa []T
				ldaa := lda
				if !transA {
					aa = a[i0*lda+k0:]
				} else {
					p := *aPack
					for kk := range kb {
						row := a[(k0+kk)*lda+i0 : (k0+kk)*lda+i0+mb]
						for ii, v := range row {
							p[ii*ldp+kk] = v
						}
					}
					aa, ldaa = p, ldp
				}
				blasGemm(false, tb, mb, nb, kb, alpha, aa, ldaa, bb, ldbb, bt, c[i0*ldc+j0:], ldc)
			}
		}
	}
}

// scaleMatrix sets C = β·C (C = 0 when β = 0, whatever C held).
func scaleMatrix[T float32 | float64](m, n int, beta T, c []T, ldc int) {
	if beta == 1 {
		return
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// blasGemm is one call of the registered gonum BLAS implementation.
func blasGemm[T float32 | float64](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	var z T
	if _, ok := any(z).(float32); ok {
		blas32.Implementation().Sgemm(trans(transA), trans(transB), m, n, k,
			*(*float32)(unsafe.Pointer(&alpha)), *(*[]float32)(unsafe.Pointer(&a)), lda,
			*(*[]float32)(unsafe.Pointer(&b)), ldb,
			*(*float32)(unsafe.Pointer(&beta)), *(*[]float32)(unsafe.Pointer(&c)), ldc)
		return
	}
	blas64.Implementation().Dgemm(trans(transA), trans(transB), m, n, k,
		*(*float64)(unsafe.Pointer(&alpha)), *(*[]float64)(unsafe.Pointer(&a)), lda,
		*(*[]float64)(unsafe.Pointer(&b)), ldb,
		*(*float64)(unsafe.Pointer(&beta)), *(*[]float64)(unsafe.Pointer(&c)), ldc)
}

// scratchList keeps idle scratch slices by power-of-two capacity, so that
// buffers of very different sizes do not evict each other. Unlike a
// sync.Pool it neither drops buffers at garbage collection nor hides one per
// processor from the others, so reuse does not depend on scheduling: a
// training step at steady state allocates no scratch.
type scratchList[T float32 | float64] struct {
	mu   sync.Mutex
	free [48][]*[]T
}

var (
	scratch32 scratchList[float32]
	scratch64 scratchList[float64]
)

// getScratch returns a slice of n elements with unspecified contents from a
// list shared by the kernels. Return it with putScratch.
func getScratch[T float32 | float64](n int) *[]T {
	class := bits.Len(uint(max(n, 1) - 1))
	l := scratchFor[T]()
	l.mu.Lock()
	if f := l.free[class]; len(f) > 0 {
		s := f[len(f)-1]
		f[len(f)-1] = nil
		l.free[class] = f[:len(f)-1]
		l.mu.Unlock()
		*s = (*s)[:n]
		return s
	}
	l.mu.Unlock()
	s := make([]T, n, 1<<class)
	return &s
}

func putScratch[T float32 | float64](s *[]T) {
	class := bits.Len(uint(cap(*s))) - 1
	l := scratchFor[T]()
	l.mu.Lock()
	l.free[class] = append(l.free[class], s)
	l.mu.Unlock()
}

func scratchFor[T float32 | float64]() *scratchList[T] {
	if l, ok := any(&scratch32).(*scratchList[T]); ok {
		return l
	}
	return any(&scratch64).(*scratchList[T])
}

// minParallelFlops is the least work, in floating-point operations, worth
// handing to another goroutine.
const minParallelFlops = 1 << 16

// MatMul implements backend.Backend: dst = α·op(a)·op(b) + β·dst for every
// index of the batch axes. The batch is cut into blocks of dst (one or more
// per product), which run in parallel, so that many small products and one
// large product both use every core.
func (c *Backend) MatMul(dst, a, b backend.View, p backend.MatMulParams) error {
	g, err := matMulGeometry(dst, a, b, p)
	if err != nil {
		return err
	}
	switch dst.DType {
	case backend.Float32:
		matMul(g, F32(dst), F32(a), F32(b), float32(p.Alpha), float32(p.Beta))
	case backend.Float64:
		matMul(g, F64(dst), F64(a), F64(b), p.Alpha, p.Beta)
	}
	return nil
}

// matMulShape is a validated batched product.
type matMulShape struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
	batch          []int    // batch extents
	strides        [3][]int // batch strides of dst, a, b
	offsets        [3]int
}

func matMulGeometry(dst, a, b backend.View, p backend.MatMulParams) (matMulShape, error) {
	var g matMulShape
	fail := func(format string, args ...any) (matMulShape, error) {
		return g, fmt.Errorf("cpu: matmul of a%v (transA %v) and b%v (transB %v) into dst%v: %s",
			a.Shape, p.TransA, b.Shape, p.TransB, dst.Shape, fmt.Sprintf(format, args...))
	}
	if dst.DType != backend.Float32 && dst.DType != backend.Float64 {
		return fail("dtype %v, want float32 or float64", dst.DType)
	}
	if a.DType != dst.DType || b.DType != dst.DType {
		return fail("dtypes %v, %v and %v differ", a.DType, b.DType, dst.DType)
	}
	r := len(dst.Shape)
	if r < 2 || len(a.Shape) != r || len(b.Shape) != r {
		return fail("operands need one rank ≥ 2")
	}
	for i := range r - 2 {
		if a.Shape[i] != dst.Shape[i] || b.Shape[i] != dst.Shape[i] {
			return fail("batch shapes differ")
		}
	}
	g.transA, g.transB = p.TransA, p.TransB
	g.m, g.n = dst.Shape[r-2], dst.Shape[r-1]
	am, ak := a.Shape[r-2], a.Shape[r-1]
	if p.TransA {
		am, ak = ak, am
	}
	bk, bn := b.Shape[r-2], b.Shape[r-1]
	if p.TransB {
		bk, bn = bn, bk
	}
	if am != g.m || bn != g.n || ak != bk {
		return fail("inner shapes do not chain")
	}
	g.k = ak
	var err error
	if g.lda, err = rowStride(a); err != nil {
		return fail("a: %v", err)
	}
	if g.ldb, err = rowStride(b); err != nil {
		return fail("b: %v", err)
	}
	if g.ldc, err = rowStride(dst); err != nil {
		return fail("dst: %v", err)
	}
	for i, v := range []backend.View{dst, a, b} {
		if !fits(v) {
			return fail("operand %d overruns its buffer", i)
		}
		g.strides[i] = v.Strides[:r-2]
		g.offsets[i] = v.Offset
	}
	for i, d := range dst.Shape[:r-2] {
		if d > 1 && dst.Strides[i] == 0 {
			return fail("dst broadcasts batch axis %d", i)
		}
	}
	g.batch = dst.Shape[:r-2]
	return g, nil
}

// rowStride returns the stride between the rows of the matrices in v (its
// last two axes), checking that each row is contiguous.
func rowStride(v backend.View) (int, error) {
	r := len(v.Shape)
	rows, cols := v.Shape[r-2], v.Shape[r-1]
	if cols > 1 && v.Strides[r-1] != 1 {
		return 0, fmt.Errorf("last axis has stride %d, want 1", v.Strides[r-1])
	}
	if rows <= 1 || cols == 0 {
		return max(cols, 1), nil
	}
	if v.Strides[r-2] < max(cols, 1) {
		return 0, fmt.Errorf("rows of %d elements have stride %d", cols, v.Strides[r-2])
	}
	return v.Strides[r-2], nil
}

// fits reports whether every element of v lies inside its buffer.
func fits(v backend.View) bool {
	last := v.Offset
	for i, d := range v.Shape {
		if d == 0 {
			return true
		}
		if v.Strides[i] < 0 {
			return false
		}
		last += (d - 1) * v.Strides[i]
	}
	return v.Offset >= 0 && (last+1)*v.DType.Size() <= v.Buf.Size()
}

func matMul[T float32 | float64](g matMulShape, dst, a, b []T, alpha, beta T) {
	nb := 1
	for _, d := range g.batch {
		nb *= d
	}
	if nb == 0 || g.m == 0 || g.n == 0 {
		return
	}
	if matMulFast(g, dst, a, b, alpha, beta) {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	tm, tn := matMulTiles(nb, g.m, g.n, g.k, workers)
	tilesM, tilesN := (g.m+tm-1)/tm, (g.n+tn-1)/tn
	perProduct := tilesM * tilesN
	grain := max(1, minParallelFlops/max(1, 2*tm*tn*g.k))
	parallelFor(nb*perProduct, grain, func(lo, hi int) {
		for u := lo; u < hi; u++ {
			bi, t := u/perProduct, u%perProduct
			off := g.offsets
			for d := len(g.batch) - 1; d >= 0; d-- {
				x := bi % g.batch[d]
				bi /= g.batch[d]
				for o := range off {
					off[o] += x * g.strides[o][d]
				}
			}
			i0, j0 := t/tilesN*tm, t%tilesN*tn
			mb, nbk := min(tm, g.m-i0), min(tn, g.n-j0)
			ao, bo := off[1], off[2]
			if g.transA {
				ao += i0
			} else {
				ao += i0 * g.lda
			}
			if g.transB {
				bo += j0 * g.ldb
			} else {
				bo += j0
			}
			gemm(g.transA, g.transB, mb, nbk, g.k, alpha, a[ao:], g.lda, b[bo:], g.ldb, beta,
				dst[off[0]+i0*g.ldc+j0:], g.ldc)
		}
	})
}

// matMulTiles chooses the block of C that one parallel task computes: the
// whole product when the batch alone gives every worker enough tasks,
// otherwise blocks small enough to give each worker about four.
func matMulTiles(batch, m, n, k, workers int) (tm, tn int) {
	tm, tn = m, n
	if workers <= 1 {
		return tm, tn
	}
	for batch*((m+tm-1)/tm)*((n+tn-1)/tn) < 4*workers && 2*tm*tn*k > 2*minParallelFlops {
		if tm >= tn && tm > gemmMB {
			tm = roundUp((tm+1)/2, 16)
		} else if tn > 16 {
			tn = roundUp((tn+1)/2, 16)
		} else {
			break
		}
	}
	return tm, tn
}

func roundUp(x, q int) int { return (x + q - 1) / q * q }
