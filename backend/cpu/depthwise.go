package cpu

// Depthwise convolutions (one input channel per group, as in MobileNet's
// separable convolutions: groups = C, any number of output channels per
// group) have too little work per output for the im2col lowering, whose
// products would be one row high. They run a direct kernel instead: each
// tap (kh, kw) adds a weighted block of input rows to the output rows it
// reaches, 16 columns at a time, through the row routines (conv_rows.go:
// AVX-512 for column stride 1 or 2, Go loops otherwise), for a run of
// planes per call. Every output is the sum of its taps in the order
// (kh, kw), and each task owns whole planes (whole kernels for the weight
// gradient, summed over the batch in order), so results do not depend on
// the number of goroutines.

// dwPlanes is how many planes of p outputs and hw inputs the kernels take
// through a tap at a time: as many as keep them all in the L1 cache (about
// 24 KiB) while their nine or so taps update them, at least one.
func dwPlanes(p, hw int) int { return max(1, (24<<10)/4/max(1, p+hw)) }

// depthwise reports whether s runs the direct depthwise kernel.
func (s *convShape) depthwise() bool { return s.cg == 1 && s.groups > 1 }

// dwTaps calls fn for each tap (kh, kw) that reaches into the plane from
// some output, and each 16-column block of the outputs it reaches: k =
// kh·KW + kw, the output rows [a, b) and the block's first output column
// j, the offset in its plane of the input of output (a, j), and the mask
// of the block's columns the tap reaches.
func (s *convShape) dwTaps(fn func(k, a, b, j, src int, mask uint32)) {
	for kh := range s.kh {
		a, b := s.tapRows(kh, 0, s.oh)
		if a == b {
			continue
		}
		src := (a*s.sh - s.ph + kh*s.dh) * s.w
		for kw := range s.kw {
			iw0, v0, v1 := s.tapCols(kw)
			for j := v0 &^ 15; j < v1; j += 16 {
				fn(kh*s.kw+kw, a, b, j, src+iw0+j*s.sw, laneMask(v0-j, v1-j))
			}
		}
	}
}

// dwRun is the run of planes a task takes through a tap at a time: those
// of one sample from u0, at most dwPlanes of them when their inputs are
// evenly spaced (one output per group), else one.
func (s *convShape) dwRun(u0, hi, perSample, evenly int) int {
	n := u0 / perSample
	step := 1
	if evenly == 1 {
		step = dwPlanes(s.positions(), s.h*s.w)
	}
	return min(hi, (n+1)*perSample, u0+step)
}

// depthwiseForward computes y = conv(x, w) for a depthwise s.
func depthwiseForward[T float32 | float64](s *convShape, xo, wo, yo int, x, w, y []T) {
	HW, P, KK := s.h*s.w, s.positions(), s.kh*s.kw
	work := 2 * P * KK
	parallelFor(s.n*s.o, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		for u0 := lo; u0 < hi; {
			u1 := s.dwRun(u0, hi, s.o, s.og)
			n, o0 := u0/s.o, u0%s.o
			clear(y[yo+u0*P : yo+u1*P])
			xp := xo + (n*s.c+o0/s.og)*HW
			s.dwTaps(func(k, a, b, j, src int, mask uint32) {
				axpyRows(y, yo+u0*P+a*s.ow+j, s.ow, 1, x, xp+src, s.sh*s.w, s.sw, b-a,
					mask, w[wo+o0*KK+k:], KK, u1-u0, P, HW)
			})
			u0 = u1
		}
	})
}

// depthwiseBackwardData computes dx from dy and w for a depthwise s; a
// task owns whole input planes, each the sum over its group's outputs.
func depthwiseBackwardData[T float32 | float64](s *convShape, dxo, wo, dyo int, dx, w, dy []T) {
	HW, P, KK := s.h*s.w, s.positions(), s.kh*s.kw
	work := 2 * P * KK * s.og
	parallelFor(s.n*s.c, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		for u0 := lo; u0 < hi; {
			u1 := s.dwRun(u0, hi, s.c, 1)
			n, g0 := u0/s.c, u0%s.c
			clear(dx[dxo+u0*HW : dxo+u1*HW])
			for oc := range s.og {
				o0 := g0*s.og + oc
				s.dwTaps(func(k, a, b, j, src int, mask uint32) {
					axpyRows(dx, dxo+u0*HW+src, s.sh*s.w, s.sw, dy, dyo+(n*s.o+o0)*P+a*s.ow+j, s.ow, 1, b-a,
						mask, w[wo+o0*KK+k:], s.og*KK, u1-u0, HW, s.og*P)
				})
			}
			u0 = u1
		}
	})
}

// depthwiseBackwardWeight computes dw from x and dy for a depthwise s; a
// task owns whole kernels, summed over the samples in order: per-lane sums
// of every tap over the batch, added across the lanes once at the end.
func depthwiseBackwardWeight[T float32 | float64](s *convShape, xo, dwo, dyo int, x, dw, dy []T) {
	HW, P, KK := s.h*s.w, s.positions(), s.kh*s.kw
	work := 2 * P * KK * s.n
	parallelFor(s.o, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		step := 1
		if s.og == 1 {
			step = dwPlanes(P, HW)
		}
		lanes := make([]T, step*KK*16)
		for o0 := lo; o0 < hi; o0 += step {
			o1 := min(hi, o0+step)
			clear(lanes)
			for n := range s.n {
				xp := xo + (n*s.c+o0/s.og)*HW
				dp := dyo + (n*s.o+o0)*P
				s.dwTaps(func(k, a, b, j, src int, mask uint32) {
					dotRows(lanes[k*16:], dy, dp+a*s.ow+j, s.ow, x, xp+src, s.sh*s.w, s.sw, b-a,
						mask, o1-o0, KK*16, P, HW)
				})
			}
			for o := o0; o < o1; o++ {
				for k := range KK {
					var sum T
					for _, v := range lanes[((o-o0)*KK+k)*16:][:16] {
						sum += v
					}
					dw[dwo+o*KK+k] = sum
				}
			}
		}
	})
}
