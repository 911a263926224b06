package cpu

import (
	"runtime"
	"unsafe"
)

// gemmFast computes gemm's product with the float32 kernels of the active
// path on the calling goroutine and reports whether it did: it declines
// float64 and the pure-Go path, which gemm then computes with gonum. Its
// callers (the convolutions, the tiles of matMul) run it from goroutines of
// their own, so it does not start more.
func gemmFast[T float32 | float64](transA, transB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) bool {
	var z T
	arch := sgemmActive.Load()
	if _, ok := any(z).(float32); !ok || arch == nil {
		return false
	}
	sgemm(arch, 1, transA, transB, m, n, k, *(*float32)(unsafe.Pointer(&alpha)), f32s(a), lda,
		f32s(b), ldb, *(*float32)(unsafe.Pointer(&beta)), f32s(c), ldc)
	return true
}

// matMulFast computes matMul's batched product with the float32 kernels of
// the active path and reports whether it did (as gemmFast).
func matMulFast[T float32 | float64](g matMulShape, dst, a, b []T, alpha, beta T) bool {
	var z T
	arch := sgemmActive.Load()
	if _, ok := any(z).(float32); !ok || arch == nil {
		return false
	}
	sgemmMatMul(arch, runtime.GOMAXPROCS(0), g, f32s(dst), f32s(a), f32s(b),
		*(*float32)(unsafe.Pointer(&alpha)), *(*float32)(unsafe.Pointer(&beta)))
	return true
}

func f32s[T float32 | float64](s []T) []float32 { return *(*[]float32)(unsafe.Pointer(&s)) }

// sgemmMatMul computes every product of a batch. Batches of many products
// run whole products in parallel, each on one goroutine; a few large
// products run one after another, each split over the threads.
func sgemmMatMul(arch *sgemmArch, threads int, g matMulShape, dst, a, b []float32, alpha, beta float32) {
	nb := 1
	for _, d := range g.batch {
		nb *= d
	}
	if nb == 0 || g.m == 0 || g.n == 0 {
		return
	}
	product := func(bi, threads int) {
		off := g.offsets
		for d := len(g.batch) - 1; d >= 0; d-- {
			x := bi % g.batch[d]
			bi /= g.batch[d]
			for o := range off {
				off[o] += x * g.strides[o][d]
			}
		}
		sgemm(arch, threads, g.transA, g.transB, g.m, g.n, g.k, alpha, a[off[1]:], g.lda, b[off[2]:], g.ldb,
			beta, dst[off[0]:], g.ldc)
	}
	flops := 2 * g.m * g.n * g.k
	if nb == 1 || (nb < 4*threads && flops >= threads*sgemmThreadFlops) {
		for bi := range nb {
			product(bi, threads)
		}
		return
	}
	parallelFor(nb, max(1, sgemmThreadFlops/max(1, flops)), func(lo, hi int) {
		for bi := lo; bi < hi; bi++ {
			product(bi, 1)
		}
	})
}
