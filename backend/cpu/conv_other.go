//go:build !amd64 || purego

package cpu

// convRowsVec reports false: other CPUs run the Go loops of im2col and
// col2im.
func convRowsVec(sw int) bool { return false }

// rowsCopy is the Go form of the AVX-512 row copy (see conv_amd64.go).
func rowsCopy(dst []float32, ldd int, src []float32, off, lds, rows, sw int, lmask, smask uint32, planes, dstStep, srcStep int) {
	for p := range planes {
		for i := range rows {
			for j := range 16 {
				if smask>>j&1 == 0 {
					continue
				}
				var v float32
				if lmask>>j&1 != 0 {
					v = src[off+p*srcStep+i*lds+sw*j]
				}
				dst[p*dstStep+i*ldd+j] = v
			}
		}
	}
}

// rowsAdd is the Go form of the AVX-512 row addition (see conv_amd64.go).
func rowsAdd(dst []float32, off, ldd int, src []float32, lds, rows, sw int, mask uint32, planes, dstStep, srcStep int) {
	for p := range planes {
		for i := range rows {
			for j := range 16 {
				if mask>>j&1 != 0 {
					dst[off+p*dstStep+i*ldd+sw*j] += src[p*srcStep+i*lds+j]
				}
			}
		}
	}
}

// rowsAxpy is the Go form of the AVX-512 row updates (see conv_amd64.go).
func rowsAxpy(dst []float32, doff, ldd, dsw int, src []float32, soff, lds, ssw, rows int, mask uint32, w []float32, wStep, planes, dstStep, srcStep int) {
	for p := range planes {
		a := w[p*wStep]
		for i := range rows {
			for j := range 16 {
				if mask>>j&1 != 0 {
					dst[doff+p*dstStep+i*ldd+dsw*j] += a * src[soff+p*srcStep+i*lds+ssw*j]
				}
			}
		}
	}
}

// rowsDotAcc is the Go form of the AVX-512 row dot products (see
// conv_amd64.go).
func rowsDotAcc(acc []float32, a []float32, aoff, lda int, b []float32, boff, ldb, bsw, rows int, mask uint32, planes, accStep, aStep, bStep int) {
	for p := range planes {
		for i := range rows {
			for j := range 16 {
				if mask>>j&1 != 0 {
					acc[p*accStep+j] += a[aoff+p*aStep+i*lda+j] * b[boff+p*bStep+i*ldb+bsw*j]
				}
			}
		}
	}
}
