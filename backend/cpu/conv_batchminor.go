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
// they read xt in place rather than packing it).

// convBatchMinorMinN is the least batch of the batch-minor lowering: the
// samples are its products' columns.
const convBatchMinorMinN = 32

// convBatchMinorPlanes reports whether planes of p positions run the
// batch-minor lowering; tests replace it to send every shape there.
var convBatchMinorPlanes = batchMinorPlanes

// batchMinorPlanes wants planes of at most 64 positions. Measured on
// ResNet-18's 3×3 stages at batch 64 (forward pass and data gradient,
// against the direct kernel), the batch-minor lowering takes 24% less time
// on 4×4 planes (512 channels) and 9% less on 8×8 (256 channels); on 16×16
// planes the difference is within the machine's noise.
func batchMinorPlanes(p int) bool { return p <= 64 }

// batchMinor reports whether the forward pass of s runs as the batch-minor
// lowering: a float32 "same" convolution with padding, unit strides and
// dilations, one group, on the AVX-512 path.
func (s *convShape) batchMinor() bool {
	arch := sgemmActive.Load()
	return arch != nil && arch.name == "avx512" && s.groups == 1 &&
		s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.oh == s.h && s.ow == s.w &&
		(s.ph > 0 || s.pw > 0) && s.n >= convBatchMinorMinN && s.c >= convDirectMinChannels && s.o > 0 &&
		convBatchMinorPlanes(s.h*s.w)
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
	N, C, O, HW := s.n, s.c, s.o, s.h*s.w
	lda := convWeightsLd(s)
	xtBuf := getScratch[float32](HW * C * N)
	defer putScratch(xtBuf)
	ytBuf := getScratch[float32](HW * O * N)
	defer putScratch(ytBuf)
	xt, yt := *xtBuf, *ytBuf

	// xt[(q·C + c)·N + n] = x[n, c, q]: channel c's N×HW matrix, transposed.
	parallelFor(C, max(1, (1<<14)/max(1, HW*N)), func(lo, hi int) {
		for c := lo; c < hi; c++ {
			transpose(xt[c*N:], C*N, x[xo+c*HW:], C*HW, N, HW)
		}
	})

	// A task is one output position and a block of fewer than 256 output
	// channels, evenly cut.
	oblocks := (O + 191) / 192
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

	// y[n, o, q] = yt[(q·O + o)·N + n]: output channel o's HW×N matrix,
	// transposed.
	parallelFor(O, max(1, (1<<14)/max(1, HW*N)), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			transpose(y[yo+o*HW:], O*HW, yt[o*N:], O*N, HW, N)
		}
	})
}
