package cpu

// On planes of a few positions — ResNet's last stages at 32 pixels, 4×4
// and 8×8 — a padded "same" convolution spends much of its work on window
// taps that fall outside the plane: 31% of a 3×3 kernel's multiply-adds on
// 4×4 planes, 16% on 8×8. Both other lowerings compute them (zeros in the
// column matrix, masked lanes in the direct kernel). The batch-minor
// lowering computes only the taps inside the plane.
//
// x is transposed to xt[q][c][n] (position, channel, sample). For output
// position q and kernel row kh, the taps kw0 ≤ kw < kw1 that fall inside
// the plane read input positions q + (kh−ph)·W + kw − pw, consecutive in
// kw, so their channels are one run of (kw1−kw0)·C consecutive rows of xt,
// N samples wide; in the direct kernel's weight layout (tap-major rows,
// directWeights) the same (kw, c) run is a run of each weight row. So each
// (q, kh) is one product
//
//	yt[q] (O × N) += w[:, (kh, kw0..kw1, :)] · xt[run]
//
// over exactly the taps inside the plane, and yt[q][o][n] is transposed back
// into y. The transposes move each element once; the products are the
// matrix kernels' (row blocks of fewer than 256 output channels, so that
// they read xt in place rather than packing it). Batches of more than
// convBatchMinorMaxN samples are taken in chunks, which bounds the scratch.

// convBatchMinorMinN is the least batch of the batch-minor lowering: the
// samples are its products' columns.
const convBatchMinorMinN = 32

// convBatchMinorPlanes and convBatchMinorWeightPlanes report whether
// planes of p positions run the batch-minor lowering, for the forward pass
// and data gradient and for the weight gradient; tests replace them to send
// every shape there.
var (
	convBatchMinorPlanes       = batchMinorPlanes
	convBatchMinorWeightPlanes = batchMinorWeightPlanes
)

// batchMinorPlanes wants planes of at most 256 positions. Measured on
// ResNet-18's 3×3 stages at batch 64, the forward pass and data gradient
// take 24% less time than by the direct kernel on 4×4 planes (512
// channels), 9% less on 8×8 (256 channels), and 5% less than by the
// column-matrix lowering on 16×16 (128 channels).
func batchMinorPlanes(p int) bool { return p <= 256 }

// batchMinorWeightPlanes wants planes of at most 16 positions: the weight
// gradient takes 35% less time than by the column-matrix lowering on 4×4
// planes, the same on 8×8 and 40% more on 16×16, where its products' many
// runs of a plane's row each read and write the whole of dw.
func batchMinorWeightPlanes(p int) bool { return p <= 16 }

// batchMinorShape reports whether s suits the batch-minor lowering, plane
// size apart: a float32 "same" convolution with padding, unit strides and
// dilations and one group, on the AVX-512 path.
func (s *convShape) batchMinorShape() bool {
	arch := sgemmActive.Load()
	return arch != nil && arch.name == "avx512" && s.groups == 1 &&
		s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.oh == s.h && s.ow == s.w &&
		(s.ph > 0 || s.pw > 0) && s.n >= convBatchMinorMinN && s.c >= convDirectMinChannels && s.o > 0
}

// batchMinor reports whether the forward pass of s runs as the batch-minor
// lowering.
func (s *convShape) batchMinor() bool {
	return s.batchMinorShape() && convBatchMinorPlanes(s.h*s.w)
}

// batchMinorWeight reports whether the weight gradient of s runs as the
// batch-minor lowering.
func (s *convShape) batchMinorWeight() bool {
	return s.batchMinorShape() && convBatchMinorWeightPlanes(s.h*s.w)
}

// insideTaps returns the kernel taps [k0, k1) of one axis whose input
// q − pad + k lies in [0, size).
func insideTaps(q, pad, size, taps int) (k0, k1 int) {
	k0 = max(0, pad-q)
	k1 = min(taps, size+pad-q)
	return k0, max(k0, k1)
}

// convForwardBatchMinor computes y = conv(x, w) by the batch-minor lowering;
// wp holds the weights in the direct layout (directWeights), xo and yo are
// the offsets of x and y.
func convForwardBatchMinor(s *convShape, xo int, x, wp []float32, yo int, y []float32) {
	C, O, HW := s.c, s.o, s.h*s.w
	lda := convWeightsLd(s)
	chunks, most := batchMinorChunks(s.n)
	xtBuf := getScratch[float32](HW * C * most)
	defer putScratch(xtBuf)
	ytBuf := getScratch[float32](HW * O * most)
	defer putScratch(ytBuf)
	xt, yt := *xtBuf, *ytBuf
	oblocks := (O + 191) / 192
	for k := range chunks {
		n0, n1 := k*s.n/chunks, (k+1)*s.n/chunks
		N := n1 - n0
		xk, yk := x[xo+n0*C*HW:], y[yo+n0*O*HW:]

		// xt[(q·C + c)·N + n] = x[n, c, q]: channel c's N×HW matrix,
		// transposed.
		parallelFor(C, max(1, (1<<14)/max(1, HW*N)), func(lo, hi int) {
			for c := lo; c < hi; c++ {
				transpose(xt[c*N:], C*N, xk[c*HW:], C*HW, N, HW)
			}
		})

		// A task is one output position and a block of fewer than 256
		// output channels, evenly cut.
		flops := 2 * (O / oblocks) * N * s.kh * s.kw * C
		parallelShare(HW*oblocks, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
			for t := lo; t < hi; t++ {
				q, ob := t/oblocks, t%oblocks
				o0, o1 := ob*O/oblocks, (ob+1)*O/oblocks
				qh, qw := q/s.w, q%s.w
				kh0, kh1 := insideTaps(qh, s.ph, s.h, s.kh)
				kw0, kw1 := insideTaps(qw, s.pw, s.w, s.kw)
				c := yt[(q*O+o0)*N:]
				if kh0 == kh1 || kw0 == kw1 {
					clear(c[:(o1-o0)*N])
					continue
				}
				var beta float32
				for kh := kh0; kh < kh1; kh++ {
					src := (qh-s.ph+kh)*s.w + qw - s.pw + kw0 // the input position of tap (kh, kw0)
					gemm(false, false, o1-o0, N, (kw1-kw0)*C, 1, wp[o0*lda+(kh*s.kw+kw0)*C:], lda,
						xt[src*C*N:], N, beta, c, N)
					beta = 1
				}
			}
		})

		// y[n, o, q] = yt[(q·O + o)·N + n]: output channel o's HW×N
		// matrix, transposed.
		parallelFor(O, max(1, (1<<14)/max(1, HW*N)), func(lo, hi int) {
			for o := lo; o < hi; o++ {
				transpose(yk[o*HW:], O*HW, yt[o*N:], O*N, HW, N)
			}
		})
	}
}

// convBatchMinorMaxN is the most samples the batch-minor lowering
// transposes at a time: its scratch holds that many samples' input and
// output, not the batch's.
const convBatchMinorMaxN = 128

// batchMinorChunks cuts a batch of n samples into chunks of at most
// convBatchMinorMaxN, as even as can be, and returns their number and the
// largest. The cut depends on n alone.
func batchMinorChunks(n int) (chunks, most int) {
	chunks = (n + convBatchMinorMaxN - 1) / convBatchMinorMaxN
	return chunks, (n + chunks - 1) / chunks
}

// convBackwardWeightBatchMinor computes dw from x and dy by the batch-minor
// lowering: x and dy are transposed to x2[c][q][n] and dy2[o][q][n], so that
// for tap (kh, kw) and an output row, the positions whose input falls
// inside the plane are one run of columns of both, and
//
//	dw[:, :, kh, kw] = Σ over those runs  dy2[:, run] · x2[:, run + offset]ᵀ
//
// (one run for the whole of the taps with kw = pw, whose every column is
// inside). A task is a tap and a block of output channels, and sums its
// runs in a fixed order, so the result does not depend on the number of
// goroutines.
func convBackwardWeightBatchMinor(s *convShape, xo int, x []float32, dwo int, dw []float32, dyo int, dy []float32) {
	C, O, HW, KK := s.c, s.o, s.h*s.w, s.kh*s.kw
	chunks, most := batchMinorChunks(s.n)
	x2Buf := getScratch[float32](C * HW * most)
	defer putScratch(x2Buf)
	dy2Buf := getScratch[float32](O * HW * most)
	defer putScratch(dy2Buf)
	ldt := convWeightsLd(s)
	dwtBuf := getScratch[float32](O * ldt)
	defer putScratch(dwtBuf)
	x2, dy2, dwt := *x2Buf, *dy2Buf, *dwtBuf
	oblocks := (O + 127) / 128
	for k := range chunks {
		n0, n1 := k*s.n/chunks, (k+1)*s.n/chunks
		N := n1 - n0
		ld := HW * N
		xk, dyk := x[xo+n0*C*HW:], dy[dyo+n0*O*HW:]

		// x2[c][q][n] = x[n, c, q], dy2[o][q][n] = dy[n, o, q]: each
		// channel's N×HW matrix, transposed.
		parallelFor(C+O, max(1, (1<<14)/max(1, ld)), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if i < C {
					transpose(x2[i*ld:], N, xk[i*HW:], C*HW, N, HW)
				} else {
					transpose(dy2[(i-C)*ld:], N, dyk[(i-C)*HW:], O*HW, N, HW)
				}
			}
		})

		// dwt[o][(kh, kw, c)], the direct layout; a task is a tap and a
		// block of output channels, adding to what the earlier chunks left.
		flops := 2 * (O / oblocks) * C * ld
		parallelShare(KK*oblocks, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
			for t := lo; t < hi; t++ {
				tap, ob := t/oblocks, t%oblocks
				kh, kw := tap/s.kw, tap%s.kw
				o0, o1 := ob*O/oblocks, (ob+1)*O/oblocks
				c := dwt[o0*ldt+tap*C:]
				// The output rows [a, b) and columns [v0, v1) whose input of
				// this tap lies inside the plane.
				a, b := max(0, s.ph-kh), min(s.h, s.h+s.ph-kh)
				v0, v1 := max(0, s.pw-kw), min(s.w, s.w+s.pw-kw)
				off := ((kh-s.ph)*s.w + kw - s.pw) * N
				var beta float32
				if k > 0 {
					beta = 1
				}
				run := func(p0, cols int) {
					gemm(false, true, o1-o0, C, cols*N, 1, dy2[o0*ld+p0*N:], ld, x2[p0*N+off:], ld, beta, c, ldt)
					beta = 1
				}
				switch {
				case a >= b || v0 >= v1:
					if k == 0 {
						for o := range o1 - o0 {
							clear(c[o*ldt : o*ldt+C])
						}
					}
				case v0 == 0 && v1 == s.w:
					run(a*s.w, (b-a)*s.w)
				default:
					for qh := a; qh < b; qh++ {
						run(qh*s.w+v0, v1-v0)
					}
				}
			}
		})
	}

	// dw[o, c, tap] = dwt[o][tap·C + c]: each row's KK×C matrix, transposed.
	parallelFor(O, max(1, (1<<14)/max(1, KK*C)), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			transpose(dw[dwo+o*C*KK:], KK, dwt[o*ldt:], C, KK, C)
		}
	})
}
