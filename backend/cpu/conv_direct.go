package cpu

import (
	"sync"
	"unsafe"
)

// The direct convolution computes "same" convolutions with unit stride
// (output planes as wide as the input's) without im2col. A tile of y is
// up to 14 output channels by two vectors of 16 output positions, each
// vector a run of positions of one sample's plane. Position q of a plane
// reads tap (kh, kw) at input position q + (kh−ph)·W + (kw−pw), so for a
// fixed tap a vector's inputs for one channel are 16 consecutive floats
// (the lanes whose window falls outside the plane masked off), and the
// next channel's are a plane further on. The kernel sums, for each tap in
// turn, over the channels of the group: the weights are read as rows of
// (tap, channel) columns, permuted once per call; the inputs are read in
// place. Nothing is written but the tile, so a convolution reads x once
// per block of output channels and writes y once: no column matrix, no
// packing, and tiles that span samples on small planes without a scratch
// copy of y.

// convTap is one entry of the direct kernel's table of taps; the assembly
// knows its layout (32 bytes).
type convTap struct {
	a      int64  // byte offset of the tap's columns in a row of the weights
	b0, b1 int64  // byte offsets of the two vectors' first inputs
	m0, m1 uint32 // the vectors' valid lanes
}

// convDirectKernel computes a tile of rows ≤ 14 rows (see directKernel in
// sgemm_gen.go).
type convDirectKernel func(a *float32, as int, b *float32, bs int, taps *convTap, ntaps int, depth int, c0, c1 *float32, ldc int, mask uint32)

// convDirectMinChannels is the least number of input channels per group of
// the direct convolution: each tap is a run of that many depth steps.
const convDirectMinChannels = 16

// direct reports whether the forward pass of s runs as the direct
// convolution on the kernel path in use.
func (s *convShape) direct() bool {
	arch := sgemmActive.Load()
	return convDirectKernels != nil && arch != nil && arch.name == "avx512" &&
		s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.ow == s.w && !s.pointwise() &&
		s.cg >= convDirectMinChannels && s.og > 0 && s.n > 0 && convDirectPlanes(s.h*s.w)
}

// convDirectPlanes reports whether planes of p positions suit the direct
// kernel; tests replace it to send every shape there.
var convDirectPlanes = directPlanes

// directPlanes wants the vectors of a plane at least 90% full (7×7 planes,
// 49 positions in 4 vectors, measured 15% slower than the column-matrix
// lowering, which packs several samples into full tiles) and no plane a
// multiple of 1 KiB but not of 4 KiB: the inputs of a vector for successive
// channels are a plane apart, and such planes crowd a few sets of the L1
// cache. Measured on ResNet's 3×3 stages (forward and data gradient) the
// direct kernel is faster than the lowering by 5–8% on 4×4 planes, 12–15%
// on 8×8, 15–17% on 14×14 and 28×28, 3–7% on 32×32 and 56×56, and 6%
// slower on 16×16.
func directPlanes(p int) bool {
	full := 16 * ((p + 15) / 16)
	return 10*full <= 11*p && (p%256 != 0 || p%1024 == 0)
}

// convDirectBlockBytes bounds the weights of a block of output channels.
var convDirectBlockBytes = 512 << 10

// convTapPool holds tap tables between calls.
var convTapPool sync.Pool

// convWeights is the layout of the direct kernel's weights: row r (an output
// channel) holds its group's channels for each tap, tap-major, ld floats
// apart.
func convWeightsLd(s *convShape) int {
	ld := s.kh * s.kw * s.cg
	if ld%512 == 0 { // rows a multiple of 2 KiB apart crowd the L1 sets
		ld += 16
	}
	return ld
}

// convForwardDirect computes y = conv(x, w) by the direct kernel; wp holds
// the weights in the direct layout (convWeightsLd), xo and yo are the
// offsets of x and y.
func convForwardDirect(s *convShape, xo int, x, wp []float32, yo int, y []float32) {
	P, HW, KK := s.positions(), s.h*s.w, s.kh*s.kw
	lda := convWeightsLd(s)
	vp := (P + 15) / 16
	nv := s.n * vp
	tiles := (nv + 1) / 2

	// The table of taps of every tile, and how many it has.
	tp, _ := convTapPool.Get().(*[]convTap)
	if tp == nil {
		tp = new([]convTap)
	}
	defer convTapPool.Put(tp)
	if cap(*tp) < tiles*(KK+1) {
		*tp = make([]convTap, tiles*(KK+1))
	}
	tabs := (*tp)[:tiles*(KK+1)]
	parallelFor(tiles, 64, func(lo, hi int) {
		for u := lo; u < hi; u++ {
			s.directTaps(tabs[u*(KK+1):(u+1)*(KK+1)], 2*u, nv, vp)
		}
	})

	// The output channels go in panels of 13–14 rows (evenly, so that no
	// tile is left with a few rows), the panels in blocks whose weights
	// stay in the L2 cache; a task is a block over a run of tiles.
	const mr, chunk = 14, 8
	panels := (s.og + mr - 1) / mr
	per := max(1, min(panels, convDirectBlockBytes/(4*lda*mr)))
	oblocks := (panels + per - 1) / per
	per = (panels + oblocks - 1) / oblocks // the same number of blocks, evened out
	chunks := (tiles + chunk - 1) / chunk
	tasks := s.groups * oblocks * chunks
	flops := 2 * per * mr * KK * s.cg * 32 * chunk
	parallelShare(tasks, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
		for task := lo; task < hi; task++ {
			g, ob, tc := task/(oblocks*chunks), task/chunks%oblocks, task%chunks
			b := &x[xo+g*s.cg*HW]
			q0, q1 := ob*per, min(panels, (ob+1)*per)
			for u := tc * chunk; u < min(tiles, (tc+1)*chunk); u++ {
				tab := tabs[u*(KK+1) : (u+1)*(KK+1)]
				tile := tab[KK]
				c0, c1 := yo+int(tile.b0)+g*s.og*P, yo+int(tile.b1)+g*s.og*P
				for q := q0; q < q1; q++ {
					oc := q * s.og / panels
					r := (q+1)*s.og/panels - oc
					convDirectKernels[r](&wp[(g*s.og+oc)*lda], lda, b, HW, &tab[0], int(tile.a), s.cg,
						&y[c0+oc*P], &y[c1+oc*P], P, tile.m0|tile.m1<<16)
				}
			}
		}
	})
}

// directTaps fills tab with the taps of the tile of vectors v and v+1 (of
// nv, vp per sample) that have a valid lane, and its last entry, tab[KK],
// with the tile itself: a the number of taps, b0 and b1 the vectors'
// offsets in y (sample and position; the second vector, if the tile has
// none, repeats the first) and m0 and m1 the lanes to store.
func (s *convShape) directTaps(tab []convTap, v, nv, vp int) {
	P, HW := s.positions(), s.h*s.w
	var base, pos, out [2]int
	var store [2]uint32
	for i := range 2 {
		vi := min(v+i, nv-1)
		n, p := vi/vp, vi%vp*16
		base[i], pos[i], out[i] = n*s.c*HW+p, p, n*s.o*P+p
		if v+i >= nv {
			pos[i] = P // no valid lane
		}
		store[i] = laneMask(0, P-pos[i])
	}
	k := 0
	for kh := range s.kh {
		for kw := range s.kw {
			dy, dx := kh-s.ph, kw-s.pw
			var m [2]uint32
			for i := range 2 {
				for l := range 16 {
					q := pos[i] + l
					if q >= P {
						break
					}
					iy, ix := q/s.w+dy, q%s.w+dx
					if iy >= 0 && iy < s.h && ix >= 0 && ix < s.w {
						m[i] |= 1 << l
					}
				}
			}
			if m[0]|m[1] == 0 {
				continue
			}
			off := dy*s.w + dx
			tab[k] = convTap{
				a:  int64(4 * (kh*s.kw + kw) * s.cg),
				b0: int64(4 * (base[0] + off)), b1: int64(4 * (base[1] + off)),
				m0: m[0], m1: m[1],
			}
			k++
		}
	}
	tab[len(tab)-1] = convTap{a: int64(k), b0: int64(out[0]), b1: int64(out[1]), m0: store[0], m1: store[1]}
}

// directWeights returns the weights of s in the direct layout, in scratch
// the caller puts back: w (offset wo) as it is, or, with flip, the flipped
// and transposed kernel of the convolution whose data gradient s computes
// (s being that convolution's transposed(): w holds s.cg·groups filters of
// s.og channels).
func directWeights(s *convShape, wo int, w []float32, flip bool) *[]float32 {
	KK, lda := s.kh*s.kw, convWeightsLd(s)
	buf := getScratch[float32](s.o * lda)
	wp := *buf
	parallelFor(s.o, max(1, (1<<15)/max(1, lda)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := wp[r*lda:]
			if !flip {
				// The row's cg×KK (channel, tap) matrix, transposed.
				transpose(row, s.cg, w[wo+r*s.cg*KK:], KK, s.cg, KK)
				continue
			}
			// Row r is input channel c of group g of the original
			// convolution, whose s.cg filters of that group hold its taps
			// s.og·KK floats apart: transpose them, then flip the taps.
			g, c := r/s.og, r%s.og
			transpose(row, s.cg, w[wo+(g*s.cg*s.og+c)*KK:], s.og*KK, s.cg, KK)
			for t := range KK / 2 {
				a, b := row[t*s.cg:(t+1)*s.cg], row[(KK-1-t)*s.cg:(KK-t)*s.cg]
				for i := range a {
					a[i], b[i] = b[i], a[i]
				}
			}
		}
	})
	return buf
}

// convTap must be the 32 bytes the assembly steps by.
var _ [unsafe.Sizeof(convTap{}) - 32]struct{}
var _ [32 - unsafe.Sizeof(convTap{})]struct{}
