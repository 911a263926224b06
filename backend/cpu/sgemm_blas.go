package cpu

import (
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// BLAS32 is gonum's float32 BLAS with the matrix product (Sgemm) computed by
// this package's kernels: AVX-512 or AVX2 assembly where the CPU has it
// (see KernelsEnv), gonum's own code otherwise. The other routines are
// gonum's. Like gonum's, it is row-major. Register it for gonum's blas32 and
// mat packages with
//
//	blas32.Use(cpu.BLAS32{})
//
// Products are bitwise reproducible: the result does not depend on Threads.
type BLAS32 struct {
	gonum.Implementation
	// Threads bounds the goroutines of one product; 0 means GOMAXPROCS.
	Threads int
}

var _ blas.Float32 = BLAS32{}

func (impl BLAS32) threads() int {
	if impl.Threads > 0 {
		return impl.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// BLAS's error messages, as gonum words them.
const (
	errTranspose = "blas: illegal transpose"
	errMLT0      = "blas: m < 0"
	errNLT0      = "blas: n < 0"
	errKLT0      = "blas: k < 0"
	errLdA       = "blas: bad leading dimension of A"
	errLdB       = "blas: bad leading dimension of B"
	errLdC       = "blas: bad leading dimension of C"
	errShortA    = "blas: insufficient length of a"
	errShortB    = "blas: insufficient length of b"
	errShortC    = "blas: insufficient length of c"
	errBatch     = "blas: batch < 0"
	errBatchLen  = "blas: batch slices differ in length"
	errStride    = "blas: bad batch stride"
)

func isTrans(t blas.Transpose) bool {
	switch t {
	case blas.NoTrans:
		return false
	case blas.Trans, blas.ConjTrans:
		return true
	}
	panic(errTranspose)
}

// checkSgemm panics, with gonum's messages, unless the arguments describe a
// valid product whose operands fit a, b and c.
func checkSgemm(tA, tB bool, m, n, k int, lenA, lda, lenB, ldb, lenC, ldc int) {
	switch {
	case m < 0:
		panic(errMLT0)
	case n < 0:
		panic(errNLT0)
	case k < 0:
		panic(errKLT0)
	}
	ar, ac := m, k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	switch {
	case lda < max(1, ac):
		panic(errLdA)
	case ldb < max(1, bc):
		panic(errLdB)
	case ldc < max(1, n):
		panic(errLdC)
	}
	if m == 0 || n == 0 {
		return
	}
	switch {
	case ar > 0 && ac > 0 && lenA < (ar-1)*lda+ac:
		panic(errShortA)
	case br > 0 && bc > 0 && lenB < (br-1)*ldb+bc:
		panic(errShortB)
	case lenC < (m-1)*ldc+n:
		panic(errShortC)
	}
}

// Sgemm computes
//
//	C = α·op(A)·op(B) + β·C
//
// where op(X) is X or Xᵀ as tA and tB say, op(A) is m×k, op(B) is k×n and C
// is m×n, all row-major with leading dimensions lda, ldb and ldc. As BLAS
// defines it, C is not read when β = 0 (NaN or Inf there does not
// propagate), and A and B are not read when α = 0 or k = 0.
func (impl BLAS32) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := isTrans(tA), isTrans(tB)
	checkSgemm(ta, tb, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	impl.sgemm(impl.threads(), ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemm is Sgemm after the checks, on up to threads goroutines.
func (impl BLAS32) sgemm(threads int, ta, tb bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if arch := sgemmActive.Load(); arch != nil {
		sgemm(arch, threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		// gonum reads A and B when α = 0 (NaN there would reach C).
		scaleMatrix(m, n, beta, c, ldc)
		return
	}
	tr := func(t bool) blas.Transpose {
		if t {
			return blas.Trans
		}
		return blas.NoTrans
	}
	impl.Implementation.Sgemm(tr(ta), tr(tb), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmBatched computes C[i] = α·op(A[i])·op(B[i]) + β·C[i] for every i, each
// product as Sgemm does it. Many small products run in parallel, one per
// goroutine; a few large ones run in turn, each on all the goroutines.
func (impl BLAS32) SgemmBatched(tA, tB blas.Transpose, m, n, k int, alpha float32, a [][]float32, lda int, b [][]float32, ldb int, beta float32, c [][]float32, ldc int) {
	ta, tb := isTrans(tA), isTrans(tB)
	if len(a) != len(c) || len(b) != len(c) {
		panic(errBatchLen)
	}
	for i := range c {
		checkSgemm(ta, tb, m, n, k, len(a[i]), lda, len(b[i]), ldb, len(c[i]), ldc)
	}
	impl.batch(len(c), m, n, k, func(i, threads int) {
		impl.sgemm(threads, ta, tb, m, n, k, alpha, a[i], lda, b[i], ldb, beta, c[i], ldc)
	})
}

// SgemmStridedBatched computes C[i] = α·op(A[i])·op(B[i]) + β·C[i] for
// i < batch, where A[i] begins at a[i·strideA], B[i] at b[i·strideB] and C[i]
// at c[i·strideC]. A stride of 0 shares one matrix among the products
// (strideC must then be 0 only for batch ≤ 1: products may not share C).
func (impl BLAS32) SgemmStridedBatched(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	ta, tb := isTrans(tA), isTrans(tB)
	switch {
	case batch < 0:
		panic(errBatch)
	case strideA < 0 || strideB < 0 || strideC < 0 || (batch > 1 && strideC == 0 && m > 0 && n > 0):
		panic(errStride)
	}
	if batch == 0 {
		// Nothing is read: check the shapes only.
		checkSgemm(ta, tb, m, n, k, math.MaxInt, lda, math.MaxInt, ldb, math.MaxInt, ldc)
		return
	}
	last := batch - 1
	lenAt := func(s []float32, stride int) int { return max(0, len(s)-last*stride) }
	checkSgemm(ta, tb, m, n, k, lenAt(a, strideA), lda, lenAt(b, strideB), ldb, lenAt(c, strideC), ldc)
	impl.batch(batch, m, n, k, func(i, threads int) {
		at := func(s []float32, off int) []float32 { return s[min(off, len(s)):] }
		impl.sgemm(threads, ta, tb, m, n, k, alpha, at(a, i*strideA), lda, at(b, i*strideB), ldb,
			beta, at(c, i*strideC), ldc)
	})
}

// batch runs product(i, threads) for i < count: in parallel over i when the
// products are many or small, else one after another with all threads.
func (impl BLAS32) batch(count, m, n, k int, product func(i, threads int)) {
	threads := impl.threads()
	flops := 2 * m * n * k
	if count <= 1 || threads == 1 || (count < 4*threads && flops >= threads*sgemmThreadFlops) {
		for i := range count {
			product(i, threads)
		}
		return
	}
	grain := max(1, sgemmThreadFlops/max(1, flops))
	workers := min(threads, (count+grain-1)/grain)
	chunk := (count + workers - 1) / workers
	run := func(w int) {
		for i := w * chunk; i < min(count, (w+1)*chunk); i++ {
			product(i, 1)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { run(w) })
	}
	run(0)
	wg.Wait()
}
