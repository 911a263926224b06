//go:build !purego

package cpu

import "math/bits"

//go:noescape
func rowsCopyAVX512(dst []float32, ldd int, src []float32, off, lds, rows int, lmask, smask uint32)

//go:noescape
func rowsAddAVX512(dst []float32, off, ldd int, src []float32, lds, rows int, mask uint32)

// convRowsVec reports whether the kernel path has the vector row copies of
// im2colRows and col2imRows: AVX-512.
func convRowsVec() bool { return activeVec() == vecAVX512 }

// rowsCopy writes, for each row i < rows, the lanes j < 16 of smask of
// dst[i·ldd+j]: src[off+i·lds+j] for the lanes of lmask (a subset of
// smask), zero for the others. Only the lanes of lmask are read, so off may
// be negative when the low lanes are not.
func rowsCopy(dst []float32, ldd int, src []float32, off, lds, rows int, lmask, smask uint32) {
	if rows <= 0 || smask == 0 {
		return
	}
	_ = dst[(rows-1)*ldd+bits.Len32(smask)-1]
	if lmask != 0 {
		if off+bits.TrailingZeros32(lmask) < 0 {
			panic("cpu: rowsCopy reads before its source")
		}
		_ = src[off+(rows-1)*lds+bits.Len32(lmask)-1]
	}
	rowsCopyAVX512(dst, ldd, src, off, lds, rows, lmask, smask)
}

// rowsAdd adds, for each row i < rows and each lane j < 16 of mask,
// src[i·lds+j] to dst[off+i·ldd+j]. Only the lanes of mask are touched, so
// off may be negative when the low lanes are not.
func rowsAdd(dst []float32, off, ldd int, src []float32, lds, rows int, mask uint32) {
	if rows <= 0 || mask == 0 {
		return
	}
	lo, hi := bits.TrailingZeros32(mask), bits.Len32(mask)-1
	if off+lo < 0 {
		panic("cpu: rowsAdd writes before its destination")
	}
	_ = dst[off+(rows-1)*ldd+hi]
	_ = src[(rows-1)*lds+hi]
	rowsAddAVX512(dst, off, ldd, src, lds, rows, mask)
}
