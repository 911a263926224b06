//go:build !purego

package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestRowsVec checks the AVX-512 row copies and row additions, for column
// strides 1 and 2, against their definitions for every mask shape:
// prefixes, suffixes, runs and single lanes, negative offsets whose low
// lanes are masked off, and row strides shorter and longer than a vector.
func TestRowsVec(t *testing.T) {
	if !convRowsVec(1) {
		t.Skip("the kernel path has no AVX-512 row copies")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 4000 {
		sw := 1 + trial%2
		rows := rng.IntN(5)
		lo := rng.IntN(17)
		hi := lo + rng.IntN(17-lo)
		width := hi + rng.IntN(17-hi)
		smask, lmask := laneMask(0, width), laneMask(lo, hi)
		ldd, lds := 16+rng.IntN(8), 1+rng.IntN(40)
		off := rng.IntN(8) - sw*lo
		if off+sw*lo < 0 {
			off = -sw * lo
		}
		planes := 1 + rng.IntN(3)
		srcStep, dstStep := rows*lds+rng.IntN(40)+16*sw, rows*ldd+rng.IntN(5)
		src := make([]float32, off+planes*srcStep+rows*lds+64)
		for i := range src {
			src[i] = rng.Float32()
		}
		dst := make([]float32, planes*dstStep+rows*ldd+16)
		for i := range dst {
			dst[i] = -1
		}
		want := append([]float32(nil), dst...)
		for p := range planes {
			for i := range rows {
				for j := range 16 {
					if smask>>j&1 == 0 {
						continue
					}
					want[p*dstStep+i*ldd+j] = 0
					if lmask>>j&1 != 0 {
						want[p*dstStep+i*ldd+j] = src[off+p*srcStep+i*lds+sw*j]
					}
				}
			}
		}
		rowsCopy(dst, ldd, src, off, lds, rows, sw, lmask, smask, planes, dstStep, srcStep)
		for i := range dst {
			if dst[i] != want[i] {
				t.Fatalf("trial %d: rowsCopy(%d planes, rows %d, stride %d, lanes [%d,%d) of %d, off %d): dst[%d] = %v, want %v",
					trial, planes, rows, sw, lo, hi, width, off, i, dst[i], want[i])
			}
		}
		// The addition, with src as the destination; rows may not overlap.
		if lds < 16*sw && rows > 1 {
			continue
		}
		acc := append([]float32(nil), src...)
		wantAcc := append([]float32(nil), src...)
		for p := range planes {
			for i := range rows {
				for j := range 16 {
					if lmask>>j&1 != 0 {
						wantAcc[off+p*srcStep+i*lds+sw*j] += dst[p*dstStep+i*ldd+j]
					}
				}
			}
		}
		rowsAdd(acc, off, lds, dst, ldd, rows, sw, lmask, planes, srcStep, dstStep)
		for i := range acc {
			if acc[i] != wantAcc[i] {
				t.Fatalf("trial %d: rowsAdd(%d planes, rows %d, stride %d, lanes [%d,%d), off %d): [%d] = %v, want %v",
					trial, planes, rows, sw, lo, hi, off, i, acc[i], wantAcc[i])
			}
		}
		if sw != 1 {
			continue
		}
		// The update a·src + dst and the dot product, on the same blocks.
		const a = 0.75
		acc = append(acc[:0], src...)
		wantAcc = append(wantAcc[:0], src...)
		for i := range rows {
			for j := range 16 {
				if lmask>>j&1 != 0 {
					wantAcc[off+i*lds+j] = acc[off+i*lds+j] + a*dst[i*ldd+j]
				}
			}
		}
		var wantDot float64
		for i := range rows {
			for j := range 16 {
				if lmask>>j&1 != 0 {
					wantDot += float64(src[off+i*lds+j]) * float64(dst[i*ldd+j])
				}
			}
		}
		dot := rowsDot(src, off, lds, dst, 0, ldd, rows, lmask)
		if d := float64(dot) - wantDot; d > 1e-5*(1+wantDot) || d < -1e-5*(1+wantDot) {
			t.Fatalf("trial %d: rowsDot(rows %d, lanes [%d,%d), off %d) = %v, want %v", trial, rows, lo, hi, off, dot, wantDot)
		}
		rowsAxpy(acc, off, lds, dst, 0, ldd, rows, lmask, a)
		for i := range acc {
			if d := acc[i] - wantAcc[i]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("trial %d: rowsAxpy(rows %d, lanes [%d,%d), off %d): [%d] = %v, want %v", trial, rows, lo, hi, off, i, acc[i], wantAcc[i])
			}
		}
	}
}
