package cpu

import (
	"math/rand/v2"
	"testing"
)

// rowsImpl is one implementation of the row routines, as float32.
type rowsImpl struct {
	name string
	copy func(dst []float32, ldd int, src []float32, off, lds, rows, sw int, lmask, smask uint32, planes, dstStep, srcStep int)
	add  func(dst []float32, off, ldd int, src []float32, lds, rows, sw int, mask uint32, planes, dstStep, srcStep int)
	axpy func(dst []float32, doff, ldd, dsw int, src []float32, soff, lds, ssw, rows int, mask uint32, w []float32, wStep, planes, dstStep, srcStep int)
	dot  func(acc []float32, a []float32, aoff, lda int, b []float32, boff, ldb, bsw, rows int, mask uint32, planes, accStep, aStep, bStep int)
}

// TestRows checks the row routines' Go loops, and on the AVX-512 path their
// assembly, for column strides 1 and 2, against their definitions for every
// run of lanes: prefixes, suffixes, inner runs and single lanes, negative
// offsets whose low lanes are masked off, row strides shorter and longer
// than a vector, and several planes.
func TestRows(t *testing.T) {
	impls := []rowsImpl{{"go", copyRowsGo[float32], addRowsGo[float32], axpyRowsGo[float32], dotRowsGo[float32]}}
	if convRowsVec(1) {
		impls = append(impls, rowsImpl{"avx512", rowsCopy, rowsAdd, rowsAxpy, rowsDotAcc})
	}
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) { checkRowImpl(t, im) })
	}
}

func checkRowImpl(t *testing.T, im rowsImpl) {
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
		im.copy(dst, ldd, src, off, lds, rows, sw, lmask, smask, planes, dstStep, srcStep)
		for i := range dst {
			if dst[i] != want[i] {
				t.Fatalf("trial %d: rowsCopy(%d planes, rows %d, stride %d, lanes [%d,%d) of %d, off %d): dst[%d] = %v, want %v",
					trial, planes, rows, sw, lo, hi, width, off, i, dst[i], want[i])
			}
		}
		// The addition, with src as the destination: the lanes a row
		// touches may not reach the next row (their vectors' spans may).
		if rows > 1 && hi > lo && sw*(hi-1-lo) >= lds {
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
		im.add(acc, off, lds, dst, ldd, rows, sw, lmask, planes, srcStep, dstStep)
		for i := range acc {
			if acc[i] != wantAcc[i] {
				t.Fatalf("trial %d: rowsAdd(%d planes, rows %d, stride %d, lanes [%d,%d), off %d): [%d] = %v, want %v",
					trial, planes, rows, sw, lo, hi, off, i, acc[i], wantAcc[i])
			}
		}
		// The updates w[p]·src + dst over the planes, each way round, and
		// the dot product on the first plane's blocks.
		weights := []float32{0.75, -1.5, 0.25}
		near := func(got, want float64) bool {
			return got-want <= 1e-5*(1+abs64(want)) && want-got <= 1e-5*(1+abs64(want))
		}
		acc = append(acc[:0], src...)
		wantAcc = append(wantAcc[:0], src...)
		wantOut := append([]float32(nil), dst...)
		out := append([]float32(nil), dst...)
		var wantDot float64
		for p := range planes {
			a := weights[p]
			for i := range rows {
				for j := range 16 {
					if lmask>>j&1 != 0 {
						wantAcc[off+p*srcStep+i*lds+sw*j] += a * dst[p*dstStep+i*ldd+j]
						wantOut[p*dstStep+i*ldd+j] += a * src[off+p*srcStep+i*lds+sw*j]
						if p == 0 {
							wantDot += float64(src[off+i*lds+sw*j]) * float64(dst[i*ldd+j])
						}
					}
				}
			}
		}
		var lanes [16]float32
		for j := range lanes {
			lanes[j] = float32(j) // rowsDotAcc adds to what is there
			wantDot += float64(j)
		}
		im.dot(lanes[:], dst, 0, ldd, src, off, lds, sw, rows, lmask, 1, 0, 0, 0)
		var dot float64
		for _, v := range lanes {
			dot += float64(v)
		}
		if !near(dot, wantDot) {
			t.Fatalf("trial %d: rowsDotAcc(rows %d, stride %d, lanes [%d,%d), off %d) sums to %v, want %v", trial, rows, sw, lo, hi, off, dot, wantDot)
		}
		im.axpy(acc, off, lds, sw, dst, 0, ldd, 1, rows, lmask, weights, 1, planes, srcStep, dstStep)
		im.axpy(out, 0, ldd, 1, src, off, lds, sw, rows, lmask, weights, 1, planes, dstStep, srcStep)
		for i := range acc {
			if !near(float64(acc[i]), float64(wantAcc[i])) {
				t.Fatalf("trial %d: rowsAxpy to stride %d (rows %d, lanes [%d,%d), off %d): [%d] = %v, want %v", trial, sw, rows, lo, hi, off, i, acc[i], wantAcc[i])
			}
		}
		for i := range out {
			if !near(float64(out[i]), float64(wantOut[i])) {
				t.Fatalf("trial %d: rowsAxpy from stride %d (rows %d, lanes [%d,%d), off %d): [%d] = %v, want %v", trial, sw, rows, lo, hi, off, i, out[i], wantOut[i])
			}
		}
	}
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
