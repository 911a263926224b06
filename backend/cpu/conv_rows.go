package cpu

import "math/bits"

// The row routines move blocks of rows of up to 16 lanes, a lane of each
// row under a mask, for im2col, col2im and the depthwise kernels: on the
// AVX-512 path the float32 ones run in assembly (rowsCopy, rowsAdd,
// rowsAxpy, rowsDotAcc in conv_amd64.go), everywhere else these Go loops
// do the same. The masks are runs of lanes (laneMask); a row's lane j is
// at column stride sw (1 or more) on the side the routine names.

// laneRun returns the lanes [lo, hi) of a mask that is one run of set
// bits; an empty mask gives an empty run at empty.
func laneRun(m uint32, empty int) (lo, hi int) {
	if m == 0 {
		return empty, empty
	}
	return bits.TrailingZeros32(m), bits.Len32(m)
}

// copyRows is rowsCopy for any float type and column stride.
func copyRows[T float32 | float64](dst []T, ldd int, src []T, off, lds, rows, sw int, lmask, smask uint32, planes, dstStep, srcStep int) {
	if d, ok := any(dst).([]float32); ok && convRowsVec(sw) {
		rowsCopy(d, ldd, any(src).([]float32), off, lds, rows, sw, lmask, smask, planes, dstStep, srcStep)
		return
	}
	copyRowsGo(dst, ldd, src, off, lds, rows, sw, lmask, smask, planes, dstStep, srcStep)
}

func copyRowsGo[T float32 | float64](dst []T, ldd int, src []T, off, lds, rows, sw int, lmask, smask uint32, planes, dstStep, srcStep int) {
	s0, s1 := laneRun(smask, 0)
	l0, l1 := laneRun(lmask, s0)
	for p := range planes {
		for i := range rows {
			d := dst[p*dstStep+i*ldd:]
			clear(d[s0:l0])
			clear(d[l1:s1])
			in := off + p*srcStep + i*lds // may be negative: lanes below l0 are not read
			if l0 == l1 {
				continue
			}
			if sw == 1 {
				copy(d[l0:l1], src[in+l0:in+l1])
				continue
			}
			for j := l0; j < l1; j++ {
				d[j] = src[in+sw*j]
			}
		}
	}
}

// addRows is rowsAdd for any float type and column stride.
func addRows[T float32 | float64](dst []T, off, ldd int, src []T, lds, rows, sw int, mask uint32, planes, dstStep, srcStep int) {
	if d, ok := any(dst).([]float32); ok && convRowsVec(sw) {
		rowsAdd(d, off, ldd, any(src).([]float32), lds, rows, sw, mask, planes, dstStep, srcStep)
		return
	}
	addRowsGo(dst, off, ldd, src, lds, rows, sw, mask, planes, dstStep, srcStep)
}

func addRowsGo[T float32 | float64](dst []T, off, ldd int, src []T, lds, rows, sw int, mask uint32, planes, dstStep, srcStep int) {
	l0, l1 := laneRun(mask, 0)
	for p := range planes {
		for i := range rows {
			d := off + p*dstStep + i*ldd // may be negative: lanes below l0 are not touched
			for j, v := range src[p*srcStep+i*lds+l0 : p*srcStep+i*lds+l1] {
				dst[d+sw*(l0+j)] += v
			}
		}
	}
}

// axpyRows is rowsAxpy for any float type and column strides.
func axpyRows[T float32 | float64](dst []T, doff, ldd, dsw int, src []T, soff, lds, ssw, rows int, mask uint32, w []T, wStep, planes, dstStep, srcStep int) {
	if d, ok := any(dst).([]float32); ok && convRowsVec(max(dsw, ssw)) {
		rowsAxpy(d, doff, ldd, dsw, any(src).([]float32), soff, lds, ssw, rows, mask, any(w).([]float32), wStep, planes, dstStep, srcStep)
		return
	}
	axpyRowsGo(dst, doff, ldd, dsw, src, soff, lds, ssw, rows, mask, w, wStep, planes, dstStep, srcStep)
}

func axpyRowsGo[T float32 | float64](dst []T, doff, ldd, dsw int, src []T, soff, lds, ssw, rows int, mask uint32, w []T, wStep, planes, dstStep, srcStep int) {
	l0, l1 := laneRun(mask, 0)
	for p := range planes {
		a := w[p*wStep]
		for i := range rows {
			d, in := doff+p*dstStep+i*ldd, soff+p*srcStep+i*lds // either may be negative
			for j := l0; j < l1; j++ {
				dst[d+dsw*j] += a * src[in+ssw*j]
			}
		}
	}
}

// dotRows is rowsDotAcc for any float type and column stride.
func dotRows[T float32 | float64](acc []T, a []T, aoff, lda int, b []T, boff, ldb, bsw, rows int, mask uint32, planes, accStep, aStep, bStep int) {
	if ac, ok := any(acc).([]float32); ok && convRowsVec(bsw) {
		rowsDotAcc(ac, any(a).([]float32), aoff, lda, any(b).([]float32), boff, ldb, bsw, rows, mask, planes, accStep, aStep, bStep)
		return
	}
	dotRowsGo(acc, a, aoff, lda, b, boff, ldb, bsw, rows, mask, planes, accStep, aStep, bStep)
}

func dotRowsGo[T float32 | float64](acc []T, a []T, aoff, lda int, b []T, boff, ldb, bsw, rows int, mask uint32, planes, accStep, aStep, bStep int) {
	l0, l1 := laneRun(mask, 0)
	for p := range planes {
		lanes := acc[p*accStep:]
		for i := range rows {
			ar, br := aoff+p*aStep+i*lda, boff+p*bStep+i*ldb // br may be negative
			for j := l0; j < l1; j++ {
				lanes[j] += a[ar+j] * b[br+bsw*j]
			}
		}
	}
}
