package cpu

// Depthwise convolutions (one input channel per group, as in MobileNet's
// separable convolutions: groups = C, any number of output channels per
// group) have too little work per output for the im2col lowering, whose
// products would be one row high. They run a direct kernel instead: each
// tap (kh, kw) adds a weighted run of an input row to a run of an output
// row, which the compiler turns into a tight loop over contiguous memory
// for unit column stride. Every output is the sum of its taps in the order
// (kh, kw), and each task owns whole planes (whole kernels for the weight
// gradient, summed over the batch in order), so results do not depend on
// the number of goroutines. On the AVX-512 path, with column stride 1 or 2,
// a tap's runs over all the rows it reaches go to one vector call
// (rowsAxpy, rowsDotAcc), 16 columns at a time.

// dwPlanes is how many planes of p outputs and hw inputs the vector paths
// take through a tap at a time: as many as keep them all in the L1 cache
// (about 24 KiB) while their nine or so taps update them, at least one.
func dwPlanes(p, hw int) int { return max(1, (24<<10)/4/max(1, p+hw)) }

// depthwise reports whether s runs the direct depthwise kernel.
func (s *convShape) depthwise() bool { return s.cg == 1 && s.groups > 1 }

// dwRuns calls fn for each tap (kh, kw) that reaches into the plane from
// output row oh: k = kh·KW + kw, the input row's offset in its plane, and
// the tap's iw0, v0 and v1 (see tapCols).
func (s *convShape) dwRuns(oh int, fn func(k, src, iw0, v0, v1 int)) {
	for kh := range s.kh {
		ih := oh*s.sh - s.ph + kh*s.dh
		if ih < 0 || ih >= s.h {
			continue
		}
		for kw := range s.kw {
			iw0, v0, v1 := s.tapCols(kw)
			if v0 < v1 {
				fn(kh*s.kw+kw, ih*s.w, iw0, v0, v1)
			}
		}
	}
}

// dwTaps calls fn for each tap (kh, kw) that reaches into the plane from
// some output: k = kh·KW + kw, the output rows [a, b) it reaches from, the
// offset in its plane of the input row of output row a, and the tap's iw0,
// v0 and v1 (see tapCols).
func (s *convShape) dwTaps(fn func(k, a, b, src, iw0, v0, v1 int)) {
	for kh := range s.kh {
		a, b := s.tapRows(kh, 0, s.oh)
		if a == b {
			continue
		}
		src := (a*s.sh - s.ph + kh*s.dh) * s.w
		for kw := range s.kw {
			iw0, v0, v1 := s.tapCols(kw)
			if v0 < v1 {
				fn(kh*s.kw+kw, a, b, src, iw0, v0, v1)
			}
		}
	}
}

// depthwiseForward computes y = conv(x, w) for a depthwise s.
func depthwiseForward[T float32 | float64](s *convShape, xo, wo, yo int, x, w, y []T) {
	HW, P, KK := s.h*s.w, s.positions(), s.kh*s.kw
	work := 2 * P * KK
	parallelFor(s.n*s.o, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		if y32, ok := any(y).([]float32); ok && convRowsVec(s.sw) {
			// A tap's rows for a run of output planes of one sample (whose
			// input planes are evenly spaced) in one call; see dwPlanes.
			x32, w32 := any(x).([]float32), any(w).([]float32)
			step := 1
			if s.og == 1 {
				step = dwPlanes(P, HW)
			}
			for u0 := lo; u0 < hi; {
				n, o0 := u0/s.o, u0%s.o
				u1 := min(hi, (n+1)*s.o, u0+step)
				clear(y32[yo+u0*P : yo+u1*P])
				xp := xo + (n*s.c+o0/s.og)*HW
				s.dwTaps(func(k, a, b, src, iw0, v0, v1 int) {
					for j := v0 &^ 15; j < v1; j += 16 {
						rowsAxpy(y32, yo+u0*P+a*s.ow+j, s.ow, 1, x32, xp+src+iw0+j*s.sw, s.sh*s.w, s.sw, b-a,
							laneMask(v0-j, v1-j), w32[wo+o0*KK+k:], KK, u1-u0, P, HW)
					}
				})
				u0 = u1
			}
			return
		}
		for u := lo; u < hi; u++ {
			n, o := u/s.o, u%s.o
			in := x[xo+(n*s.c+o/s.og)*HW:][:HW]
			wk := w[wo+o*KK:][:KK]
			out := y[yo+u*P:][:P]
			clear(out)
			for oh := range s.oh {
				row := out[oh*s.ow : (oh+1)*s.ow]
				s.dwRuns(oh, func(k, src, iw0, v0, v1 int) {
					wv := wk[k]
					if s.sw == 1 {
						seg := in[src+iw0+v0 : src+iw0+v1]
						dst := row[v0:v1]
						for i, v := range seg {
							dst[i] += wv * v
						}
						return
					}
					for ow := v0; ow < v1; ow++ {
						row[ow] += wv * in[src+iw0+ow*s.sw]
					}
				})
			}
		}
	})
}

// depthwiseBackwardData computes dx from dy and w for a depthwise s; a
// task owns whole input planes, each the sum over its group's outputs.
func depthwiseBackwardData[T float32 | float64](s *convShape, dxo, wo, dyo int, dx, w, dy []T) {
	HW, P, KK := s.h*s.w, s.positions(), s.kh*s.kw
	work := 2 * P * KK * s.og
	parallelFor(s.n*s.c, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		if dx32, ok := any(dx).([]float32); ok && convRowsVec(s.sw) {
			// A tap's rows for a run of input planes of one sample in one
			// call, one output of each group at a time; see dwPlanes.
			dy32, w32 := any(dy).([]float32), any(w).([]float32)
			for u0 := lo; u0 < hi; {
				n, g0 := u0/s.c, u0%s.c
				u1 := min(hi, (n+1)*s.c, u0+dwPlanes(P, HW))
				clear(dx32[dxo+u0*HW : dxo+u1*HW])
				for oc := range s.og {
					o0 := g0*s.og + oc
					s.dwTaps(func(k, a, b, src, iw0, v0, v1 int) {
						for j := v0 &^ 15; j < v1; j += 16 {
							rowsAxpy(dx32, dxo+u0*HW+src+iw0+j*s.sw, s.sh*s.w, s.sw, dy32, dyo+(n*s.o+o0)*P+a*s.ow+j, s.ow, 1, b-a,
								laneMask(v0-j, v1-j), w32[wo+o0*KK+k:], s.og*KK, u1-u0, HW, s.og*P)
						}
					})
				}
				u0 = u1
			}
			return
		}
		for u := lo; u < hi; u++ {
			n, g := u/s.c, u%s.c
			in := dx[dxo+u*HW:][:HW]
			clear(in)
			for oc := range s.og {
				o := g*s.og + oc
				wk := w[wo+o*KK:][:KK]
				grad := dy[dyo+(n*s.o+o)*P:][:P]
				for oh := range s.oh {
					row := grad[oh*s.ow : (oh+1)*s.ow]
					s.dwRuns(oh, func(k, src, iw0, v0, v1 int) {
						wv := wk[k]
						if s.sw == 1 {
							dst := in[src+iw0+v0 : src+iw0+v1]
							for i, v := range row[v0:v1] {
								dst[i] += wv * v
							}
							return
						}
						for ow := v0; ow < v1; ow++ {
							in[src+iw0+ow*s.sw] += wv * row[ow]
						}
					})
				}
			}
		}
	})
}

// depthwiseBackwardWeight computes dw from x and dy for a depthwise s; a
// task owns whole kernels, summed over the samples in order.
func depthwiseBackwardWeight[T float32 | float64](s *convShape, xo, dwo, dyo int, x, dw, dy []T) {
	HW, P, KK := s.h*s.w, s.positions(), s.kh*s.kw
	work := 2 * P * KK * s.n
	parallelFor(s.o, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		if dw32, ok := any(dw).([]float32); ok && convRowsVec(s.sw) {
			// Per-lane sums of every tap over all the samples, added
			// across the lanes once at the end; a tap's rows for a run of
			// planes in one call (see dwPlanes).
			x32, dy32 := any(x).([]float32), any(dy).([]float32)
			step := 1
			if s.og == 1 {
				step = dwPlanes(P, HW)
			}
			lanes := make([]float32, step*KK*16)
			for o0 := lo; o0 < hi; o0 += step {
				o1 := min(hi, o0+step)
				clear(lanes)
				for n := range s.n {
					xp := xo + (n*s.c+o0/s.og)*HW
					dp := dyo + (n*s.o+o0)*P
					s.dwTaps(func(k, a, b, src, iw0, v0, v1 int) {
						for j := v0 &^ 15; j < v1; j += 16 {
							rowsDotAcc(lanes[k*16:], dy32, dp+a*s.ow+j, s.ow, x32, xp+src+iw0+j*s.sw, s.sh*s.w, s.sw, b-a,
								laneMask(v0-j, v1-j), o1-o0, KK*16, P, HW)
						}
					})
				}
				for o := o0; o < o1; o++ {
					for k := range KK {
						var sum float32
						for _, v := range lanes[((o-o0)*KK+k)*16:][:16] {
							sum += v
						}
						dw32[dwo+o*KK+k] = sum
					}
				}
			}
			return
		}
		for o := lo; o < hi; o++ {
			wk := dw[dwo+o*KK:][:KK]
			clear(wk)
			for n := range s.n {
				in := x[xo+(n*s.c+o/s.og)*HW:][:HW]
				grad := dy[dyo+(n*s.o+o)*P:][:P]
				for oh := range s.oh {
					row := grad[oh*s.ow : (oh+1)*s.ow]
					s.dwRuns(oh, func(k, src, iw0, v0, v1 int) {
						var sum T
						if s.sw == 1 {
							seg := in[src+iw0+v0 : src+iw0+v1]
							for i, v := range row[v0:v1] {
								sum += v * seg[i]
							}
						} else {
							for ow := v0; ow < v1; ow++ {
								sum += row[ow] * in[src+iw0+ow*s.sw]
							}
						}
						wk[k] += sum
					})
				}
			}
		}
	})
}
