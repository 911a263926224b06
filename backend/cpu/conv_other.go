//go:build !amd64 || purego

package cpu

// convRowsVec reports false: other CPUs run the Go loops of the row
// routines (conv_rows.go), which the functions below are.
func convRowsVec(sw int) bool { return false }

func rowsCopy(dst []float32, ldd int, src []float32, off, lds, rows, sw int, lmask, smask uint32, planes, dstStep, srcStep int) {
	copyRowsGo(dst, ldd, src, off, lds, rows, sw, lmask, smask, planes, dstStep, srcStep)
}

func rowsAdd(dst []float32, off, ldd int, src []float32, lds, rows, sw int, mask uint32, planes, dstStep, srcStep int) {
	addRowsGo(dst, off, ldd, src, lds, rows, sw, mask, planes, dstStep, srcStep)
}

func rowsAxpy(dst []float32, doff, ldd, dsw int, src []float32, soff, lds, ssw, rows int, mask uint32, w []float32, wStep, planes, dstStep, srcStep int) {
	axpyRowsGo(dst, doff, ldd, dsw, src, soff, lds, ssw, rows, mask, w, wStep, planes, dstStep, srcStep)
}

func rowsDotAcc(acc []float32, a []float32, aoff, lda int, b []float32, boff, ldb, bsw, rows int, mask uint32, planes, accStep, aStep, bStep int) {
	dotRowsGo(acc, a, aoff, lda, b, boff, ldb, bsw, rows, mask, planes, accStep, aStep, bStep)
}

// convDirectKernels is nil: the direct convolution needs AVX-512.
var convDirectKernels []convDirectKernel
