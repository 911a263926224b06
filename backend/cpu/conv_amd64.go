//go:build !purego

package cpu

import "math/bits"

//go:noescape
func rowsCopyAVX512(dst []float32, ldd int, src []float32, off, lds, rows int, lmask, smask uint32, planes, dstStep, srcStep, sw int)

//go:noescape
func rowsAddAVX512(dst []float32, off, ldd int, src []float32, lds, rows int, smask, dmask uint32, planes, dstStep, srcStep, sw int)

//go:noescape
func rowsAxpyAVX512(dst []float32, doff, ldd int, src []float32, soff, lds, rows int, mask, wide uint32, w []float32, mode, planes, dstStep, srcStep, wStep int)

//go:noescape
func rowsDotAccAVX512(acc []float32, a []float32, aoff, lda int, b []float32, boff, ldb, rows int, mask, wide uint32, bsw, planes, accStep, aStep, bStep int)

// checkRows panics unless the lanes of mask (column stride sw) of rows
// rows, ld apart from off, lie inside a slice of n elements.
func checkRows(n, off, ld, sw, rows int, mask uint32) {
	lo, hi := bits.TrailingZeros32(mask), bits.Len32(mask)-1
	if off+sw*lo < 0 || off+(rows-1)*ld+sw*hi >= n {
		panic("cpu: row block outside its slice")
	}
}

// rowsAxpy adds, for each plane p < planes, row i < rows and lane j < 16
// of mask, w[p·wStep]·src[soff+p·srcStep+i·lds+ssw·j] to
// dst[doff+p·dstStep+i·ldd+dsw·j]; the column strides dsw and ssw are 1 or
// 2, not both 2. Only the elements of the lanes of mask are touched, so an
// offset may be negative when the low lanes are not.
func rowsAxpy(dst []float32, doff, ldd, dsw int, src []float32, soff, lds, ssw, rows int, mask uint32, w []float32, wStep, planes, dstStep, srcStep int) {
	if rows <= 0 || planes <= 0 || mask == 0 {
		return
	}
	checkRows(len(dst), doff+(planes-1)*dstStep, ldd, dsw, rows, mask)
	checkRows(len(src), soff+(planes-1)*srcStep, lds, ssw, rows, mask)
	checkRows(len(dst), doff, ldd, dsw, 1, mask)
	checkRows(len(src), soff, lds, ssw, 1, mask)
	_ = w[(planes-1)*wStep]
	mode := 0
	switch {
	case ssw == 2:
		mode = 1
	case dsw == 2:
		mode = 2
	}
	// Destination rows closer than the vectors' span would make each
	// row's load wait for the previous row's masked store, which the CPU
	// does not forward: take every k-th row in k interleaved passes.
	if k := (16*dsw + ldd - 1) / max(1, ldd); rows > 1 && ldd > 0 && k > 1 {
		for r := range min(k, rows) {
			rowsAxpyAVX512(dst, doff+r*ldd, k*ldd, src, soff+r*lds, k*lds, (rows-r+k-1)/k, mask, spread(mask),
				w, mode, planes, dstStep, srcStep, wStep)
		}
		return
	}
	rowsAxpyAVX512(dst, doff, ldd, src, soff, lds, rows, mask, spread(mask), w, mode, planes, dstStep, srcStep, wStep)
}

// rowsDotAcc adds to acc[p·accStep+j], for each plane p < planes and lane
// j < 16 of mask, the sum over rows i < rows of
// a[aoff+p·aStep+i·lda+j]·b[boff+p·bStep+i·ldb+bsw·j], in row order; bsw
// is 1 or 2. Only the elements of the lanes of mask are read.
func rowsDotAcc(acc []float32, a []float32, aoff, lda int, b []float32, boff, ldb, bsw, rows int, mask uint32, planes, accStep, aStep, bStep int) {
	if rows <= 0 || planes <= 0 || mask == 0 {
		return
	}
	_ = acc[(planes-1)*accStep+15]
	checkRows(len(a), aoff, lda, 1, 1, mask)
	checkRows(len(b), boff, ldb, bsw, 1, mask)
	checkRows(len(a), aoff+(planes-1)*aStep, lda, 1, rows, mask)
	checkRows(len(b), boff+(planes-1)*bStep, ldb, bsw, rows, mask)
	rowsDotAccAVX512(acc, a, aoff, lda, b, boff, ldb, rows, mask, spread(mask), bsw, planes, accStep, aStep, bStep)
}

// convRowsVec reports whether the kernel path runs the row routines
// (conv_rows.go) in assembly for column stride sw: AVX-512, stride 1 or 2.
func convRowsVec(sw int) bool { return (sw == 1 || sw == 2) && activeVec() == vecAVX512 }

// spread moves bit j of m to bit 2j, for j < 16.
func spread(m uint32) uint32 {
	m &= 0xffff
	m = (m | m<<8) & 0x00ff00ff
	m = (m | m<<4) & 0x0f0f0f0f
	m = (m | m<<2) & 0x33333333
	m = (m | m<<1) & 0x55555555
	return m
}

// rowsCopy writes, for each plane p < planes and row i < rows, the lanes
// j < 16 of smask of dst[p·dstStep+i·ldd+j]: src[off+p·srcStep+i·lds+sw·j]
// for the lanes of lmask (a subset of smask), zero for the others; sw is 1
// or 2. Only the elements of the lanes of lmask are read, so off may be
// negative when the low lanes are not.
func rowsCopy(dst []float32, ldd int, src []float32, off, lds, rows, sw int, lmask, smask uint32, planes, dstStep, srcStep int) {
	if rows <= 0 || planes <= 0 || smask == 0 {
		return
	}
	_ = dst[(planes-1)*dstStep+(rows-1)*ldd+bits.Len32(smask)-1]
	if lmask != 0 {
		if off+sw*bits.TrailingZeros32(lmask) < 0 {
			panic("cpu: rowsCopy reads before its source")
		}
		_ = src[off+(planes-1)*srcStep+(rows-1)*lds+sw*(bits.Len32(lmask)-1)]
	}
	if sw == 2 {
		lmask = spread(lmask)
	}
	rowsCopyAVX512(dst, ldd, src, off, lds, rows, lmask, smask, planes, dstStep, srcStep, sw)
}

// rowsAdd adds, for each plane p < planes, row i < rows and lane j < 16
// of mask, src[p·srcStep+i·lds+j] to dst[off+p·dstStep+i·ldd+sw·j]; sw is
// 1 or 2. Only the elements of the lanes of mask are touched, so off may be
// negative when the low lanes are not.
func rowsAdd(dst []float32, off, ldd int, src []float32, lds, rows, sw int, mask uint32, planes, dstStep, srcStep int) {
	if rows <= 0 || planes <= 0 || mask == 0 {
		return
	}
	lo, hi := bits.TrailingZeros32(mask), bits.Len32(mask)-1
	if off+sw*lo < 0 {
		panic("cpu: rowsAdd writes before its destination")
	}
	_ = dst[off+(planes-1)*dstStep+(rows-1)*ldd+sw*hi]
	_ = src[(planes-1)*srcStep+(rows-1)*lds+hi]
	dmask := mask
	if sw == 2 {
		dmask = spread(mask)
	}
	// As in rowsAxpy, destination rows closer than the vectors' span go in
	// interleaved passes.
	if k := (16*sw + ldd - 1) / max(1, ldd); rows > 1 && ldd > 0 && k > 1 {
		for r := range min(k, rows) {
			rowsAddAVX512(dst, off+r*ldd, k*ldd, src[r*lds:], k*lds, (rows-r+k-1)/k, mask, dmask, planes, dstStep, srcStep, sw)
		}
		return
	}
	rowsAddAVX512(dst, off, ldd, src, lds, rows, mask, dmask, planes, dstStep, srcStep, sw)
}

// convDirectKernels are the direct convolution's kernels by rows.
var convDirectKernels = convDirectAVX512Kernels[:]
