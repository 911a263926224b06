package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/flockml/flock/backend"
)

// vecPaths returns the kernel paths of this CPU that have vector loops.
func vecPaths() []string {
	var ps []string
	for _, p := range KernelPaths() {
		if p != "go" {
			ps = append(ps, p)
		}
	}
	return ps
}

// onPath runs the rest of a test on the named kernel path.
func onPath(t *testing.T, name string) {
	t.Helper()
	old := KernelPath()
	if err := useKernelPath(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := useKernelPath(old); err != nil {
			t.Error(err)
		}
	})
}

// vecLengths cross every tail length of both vector widths, and a few long
// slices.
var vecLengths = []int{0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 100, 255, 1000, 4099}

// randF32 returns n values uniform in [lo, hi) with, when special is set, a
// sprinkling of zeros of both signs, infinities and NaN.
func randF32(r *rand.Rand, n int, lo, hi float64, special bool) []float32 {
	s := make([]float32, n)
	sp := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i := range s {
		s[i] = float32(lo + (hi-lo)*r.Float64())
		if special && r.IntN(16) == 0 {
			s[i] = sp[r.IntN(len(sp))]
		}
	}
	return s
}

// closeF32 reports whether got is within atol + rtol·|want| of want (NaN
// matching NaN, infinities matching exactly).
func closeF32(got, want float32, rtol, atol float64) bool {
	g, w := float64(got), float64(want)
	if math.IsNaN(w) || math.IsNaN(g) {
		return math.IsNaN(w) && math.IsNaN(g)
	}
	if math.IsInf(w, 0) || math.IsInf(g, 0) {
		return g == w
	}
	return math.Abs(g-w) <= atol+rtol*math.Abs(w)
}

// TestVecUnaryTwins compares the vector unary loops with their Go twins.
func TestVecUnaryTwins(t *testing.T) {
	cases := []struct {
		op         backend.UnaryOp
		arg        float64
		lo, hi     float64
		rtol, atol float64
	}{
		{backend.ReLU, 0, -3, 3, 0, 0},
		{backend.AddScalar, 0.75, -3, 3, 0, 0},
		{backend.MulScalar, -1.25, -3, 3, 0, 0},
		{backend.GELU, 0, -16, 16, 1e-5, 1e-30},
		{backend.GELU, 0, -4, 4, 2e-6, 1e-30},
	}
	for _, path := range vecPaths() {
		t.Run(path, func(t *testing.T) {
			onPath(t, path)
			r := rand.New(rand.NewPCG(1, 2))
			for _, c := range cases {
				for _, n := range vecLengths {
					x := randF32(r, n, c.lo, c.hi, true)
					got := make([]float32, n)
					if !unaryVec(c.op, got, x, c.arg) {
						t.Fatalf("%s: no vector loop for unary op %d", path, c.op)
					}
					want := make([]float32, n)
					unaryFloat(c.op, want, x, c.arg)
					for i := range got {
						if !closeF32(got[i], want[i], c.rtol, c.atol) {
							t.Fatalf("%s: unary op %d of %v (n=%d, i=%d) = %v, want %v", path, c.op, x[i], n, i, got[i], want[i])
						}
					}
					// In place.
					unaryVec(c.op, x, x, c.arg)
					for i := range got {
						if math.Float32bits(x[i]) != math.Float32bits(got[i]) {
							t.Fatalf("%s: unary op %d in place differs at %d of %d", path, c.op, i, n)
						}
					}
				}
			}
		})
	}
}

// TestVecBinaryTwins compares the vector binary loops with their Go twins.
func TestVecBinaryTwins(t *testing.T) {
	cases := []struct {
		op         backend.BinaryOp
		lo, hi     float64
		rtol, atol float64
	}{
		{backend.Add, -5, 5, 0, 0},
		{backend.Sub, -5, 5, 0, 0},
		{backend.Mul, -5, 5, 0, 0},
		{backend.Div, -5, 5, 0, 0},
		{backend.ReLUGrad, -3, 3, 0, 0},
		{backend.GELUGrad, -16, 16, 1e-5, 1e-6},
	}
	for _, path := range vecPaths() {
		t.Run(path, func(t *testing.T) {
			onPath(t, path)
			r := rand.New(rand.NewPCG(3, 4))
			for _, c := range cases {
				for _, n := range vecLengths {
					a := randF32(r, n, -5, 5, c.rtol == 0)
					b := randF32(r, n, c.lo, c.hi, true)
					got := make([]float32, n)
					if !binaryVec(c.op, got, a, b) {
						t.Fatalf("%s: no vector loop for binary op %d", path, c.op)
					}
					want := make([]float32, n)
					binaryFloat(c.op, want, a, b)
					for i := range got {
						// The gradient's error is relative to the size of
						// its terms, a·Φ and a·x·φ.
						atol := 0.0
						if c.atol != 0 {
							atol = c.atol * math.Abs(float64(a[i]))
						}
						if !closeF32(got[i], want[i], c.rtol, atol) {
							t.Fatalf("%s: binary op %d of (%v, %v) (n=%d, i=%d) = %v, want %v", path, c.op, a[i], b[i], n, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestVecSplitInvariant checks that an element's value does not depend on
// where the slice handed to a vector loop starts and ends.
func TestVecSplitInvariant(t *testing.T) {
	for _, path := range vecPaths() {
		t.Run(path, func(t *testing.T) {
			onPath(t, path)
			r := rand.New(rand.NewPCG(5, 6))
			const n = 203
			x := randF32(r, n, -8, 8, false)
			g := randF32(r, n, -2, 2, false)
			whole := make([]float32, n)
			binaryVec(backend.GELUGrad, whole, g, x)
			wholeF := make([]float32, n)
			unaryVec(backend.GELU, wholeF, x, 0)
			for _, cut := range []int{1, 3, 7, 13, 16, 50, 101} {
				part := make([]float32, n)
				partF := make([]float32, n)
				for lo := 0; lo < n; lo += cut {
					hi := min(lo+cut, n)
					binaryVec(backend.GELUGrad, part[lo:hi], g[lo:hi], x[lo:hi])
					unaryVec(backend.GELU, partF[lo:hi], x[lo:hi], 0)
				}
				for i := range part {
					if part[i] != whole[i] || partF[i] != wholeF[i] {
						t.Fatalf("cut %d: element %d differs from the whole slice's", cut, i)
					}
				}
			}
		})
	}
}

func BenchmarkVecUnary(b *testing.B) {
	for _, op := range []struct {
		name string
		op   backend.UnaryOp
	}{{"ReLU", backend.ReLU}, {"GELU", backend.GELU}, {"MulScalar", backend.MulScalar}} {
		for _, path := range KernelPaths() {
			b.Run(fmt.Sprintf("%s/%s", op.name, path), func(b *testing.B) {
				old := KernelPath()
				if err := useKernelPath(path); err != nil {
					b.Fatal(err)
				}
				defer useKernelPath(old)
				r := rand.New(rand.NewPCG(1, 1))
				x := randF32(r, 1<<14, -4, 4, false)
				d := make([]float32, len(x))
				b.SetBytes(int64(8 * len(x)))
				for b.Loop() {
					if !unaryVec(op.op, d, x, 0.5) {
						unaryFloat(op.op, d, x, 0.5)
					}
				}
			})
		}
	}
}

func BenchmarkVecBinary(b *testing.B) {
	for _, op := range []struct {
		name string
		op   backend.BinaryOp
	}{{"Add", backend.Add}, {"ReLUGrad", backend.ReLUGrad}, {"GELUGrad", backend.GELUGrad}} {
		for _, path := range KernelPaths() {
			b.Run(fmt.Sprintf("%s/%s", op.name, path), func(b *testing.B) {
				old := KernelPath()
				if err := useKernelPath(path); err != nil {
					b.Fatal(err)
				}
				defer useKernelPath(old)
				r := rand.New(rand.NewPCG(1, 1))
				x := randF32(r, 1<<14, -4, 4, false)
				g := randF32(r, 1<<14, -1, 1, false)
				d := make([]float32, len(x))
				b.SetBytes(int64(12 * len(x)))
				for b.Loop() {
					binaryF32(op.op, d, g, x)
				}
			})
		}
	}
}

// TestVecNormTwins compares the vector batch-normalisation loops with their
// Go twins: sums to float64 rounding, elementwise results to float32's.
func TestVecNormTwins(t *testing.T) {
	ref := goNormLoops[float32]()
	for _, path := range vecPaths() {
		t.Run(path, func(t *testing.T) {
			onPath(t, path)
			k := normLoopsF32()
			r := rand.New(rand.NewPCG(7, 8))
			for _, n := range vecLengths {
				x := randF32(r, n, -3, 5, false)
				dy := randF32(r, n, -2, 2, false)
				mag := 0.0
				for i := range x {
					mag += math.Abs(float64(x[i])) * (1 + math.Abs(float64(dy[i])) + math.Abs(float64(x[i])))
				}
				near := func(what string, got, want float64) {
					if math.Abs(got-want) > 1e-13*(mag+1) {
						t.Fatalf("%s n=%d: %v, want %v", what, n, got, want)
					}
				}
				near("sum", k.sum(x), ref.sum(x))
				near("sumSqDev", k.sumSqDev(x, 0.75), ref.sumSqDev(x, 0.75))
				s, sx := k.gradSums(dy, x, 0.75)
				ws, wsx := ref.gradSums(dy, x, 0.75)
				near("gradSums dy", s, ws)
				near("gradSums dy·x", sx, wsx)
				got, want := make([]float32, n), make([]float32, n)
				k.affine(got, x, 1.25, -0.5)
				ref.affine(want, x, 1.25, -0.5)
				for i := range got {
					if !closeF32(got[i], want[i], 1.2e-7, 1e-30) {
						t.Fatalf("affine n=%d, i=%d: %v, want %v", n, i, got[i], want[i])
					}
				}
				k.gradDx(got, dy, x, 1.5, 0.25, -0.125, 0.75)
				ref.gradDx(want, dy, x, 1.5, 0.25, -0.125, 0.75)
				for i := range got {
					if !closeF32(got[i], want[i], 1.2e-7, 1e-6) {
						t.Fatalf("gradDx n=%d, i=%d: %v, want %v", n, i, got[i], want[i])
					}
				}
				// The ReLU forms, masked by an output with zeros and NaN.
				k.affineReLU(got, x, 1.25, -0.5)
				ref.affineReLU(want, x, 1.25, -0.5)
				for i := range got {
					if !closeF32(got[i], want[i], 1.2e-7, 1e-30) {
						t.Fatalf("affineReLU n=%d, i=%d: %v, want %v", n, i, got[i], want[i])
					}
				}
				y := randF32(r, n, -1, 1, true)
				s, sx = k.gradSumsMasked(dy, y, x, 0.75)
				ws, wsx = ref.gradSumsMasked(dy, y, x, 0.75)
				near("gradSumsMasked dy", s, ws)
				near("gradSumsMasked dy·x", sx, wsx)
				k.gradDxMasked(got, dy, y, x, 1.5, 0.25, -0.125, 0.75)
				ref.gradDxMasked(want, dy, y, x, 1.5, 0.25, -0.125, 0.75)
				for i := range got {
					if !closeF32(got[i], want[i], 1.2e-7, 1e-6) {
						t.Fatalf("gradDxMasked n=%d, i=%d: %v, want %v", n, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestVecMaxPoolTwins compares max pooling on each vector path with the Go
// path bit for bit, indices included, on inputs with ties, NaNs and
// infinities.
func TestVecMaxPoolTwins(t *testing.T) {
	type pcase struct {
		h, w int
		p    backend.PoolParams
	}
	pp := func(k, s, pad, d int, ceil bool) backend.PoolParams {
		return backend.PoolParams{KernelH: k, KernelW: k, StrideH: s, StrideW: s, PadH: pad, PadW: pad, DilationH: d, DilationW: d, CeilMode: ceil}
	}
	cases := []pcase{
		{28, 28, pp(2, 2, 0, 1, false)},
		{7, 9, pp(2, 2, 0, 1, false)},
		{7, 9, pp(2, 2, 0, 1, true)},
		{112, 112, pp(3, 2, 1, 1, false)},
		{13, 75, pp(3, 2, 1, 1, true)},
		{40, 70, pp(3, 2, 1, 2, false)},
		{9, 41, pp(4, 2, 2, 1, false)},
		{5, 5, pp(5, 2, 2, 1, false)},
		{33, 1, pp(1, 2, 0, 1, false)},
		{20, 50, backend.PoolParams{KernelH: 3, KernelW: 2, StrideH: 3, StrideW: 2, PadH: 1, DilationH: 1, DilationW: 3}},
	}
	dev := New()
	run := func(c pcase, x []float32) ([]float32, []int64) {
		oh, ow := c.p.OutputSize(c.h, c.w)
		xs, ys := backend.Shape{2, 3, c.h, c.w}, backend.Shape{2, 3, oh, ow}
		xb, _ := dev.Alloc(4 * len(x))
		yb, _ := dev.Alloc(4 * ys.NumElements())
		ib, _ := dev.Alloc(8 * ys.NumElements())
		defer dev.Free(xb)
		defer dev.Free(yb)
		defer dev.Free(ib)
		xv := backend.Contiguous(xb, backend.Float32, xs)
		copy(F32(xv), x)
		yv, iv := backend.Contiguous(yb, backend.Float32, ys), backend.Contiguous(ib, backend.Int64, ys)
		if err := dev.Pool2d(backend.MaxPool, yv, iv, xv, c.p); err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), F32(yv)[:ys.NumElements()]...), append([]int64(nil), I64(iv)[:ys.NumElements()]...)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range cases {
		x := make([]float32, 6*c.h*c.w)
		sp := []float32{float32(math.NaN()), float32(math.Inf(-1)), float32(math.Inf(1)), 0, float32(math.Copysign(0, -1))}
		for i := range x {
			x[i] = float32(r.IntN(5)) // ties
			if r.IntN(20) == 0 {
				x[i] = sp[r.IntN(len(sp))]
			}
		}
		onPath(t, "go")
		wantY, wantI := run(c, x)
		for _, path := range vecPaths() {
			onPath(t, path)
			gotY, gotI := run(c, x)
			for i := range gotY {
				if math.Float32bits(gotY[i]) != math.Float32bits(wantY[i]) || gotI[i] != wantI[i] {
					t.Fatalf("%s: %dx%d %+v: output %d = %v at %d, want %v at %d", path, c.h, c.w, c.p, i, gotY[i], gotI[i], wantY[i], wantI[i])
				}
			}
		}
	}
}

// TestVecSGDTwins compares the vector SGD update with the Go loop.
func TestVecSGDTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, nesterov := range []bool{false, true} {
		p := backend.SGDParams{LR: 0.1, Momentum: 0.9, Dampening: 0.1, WeightDecay: 1e-2, Nesterov: nesterov}
		for _, n := range vecLengths {
			w0, g, b0 := randF32(r, n, -1, 1, false), randF32(r, n, -1, 1, false), randF32(r, n, -1, 1, false)
			run := func(path string) (w, b []float32) {
				onPath(t, path)
				w, b = append([]float32(nil), w0...), append([]float32(nil), b0...)
				sgdStep(w, g, b, p)
				return w, b
			}
			wantW, wantB := run("go")
			for _, path := range vecPaths() {
				w, b := run(path)
				for i := range w {
					if !closeF32(w[i], wantW[i], 1.2e-7, 0) || !closeF32(b[i], wantB[i], 1.2e-7, 0) {
						t.Fatalf("%s n=%d nesterov=%v: element %d: w %v b %v, want %v %v", path, n, nesterov, i, w[i], b[i], wantW[i], wantB[i])
					}
				}
			}
		}
	}
}

// TestVecReduceTwins compares the vector sums with the Go loops: column
// sums bit for bit (the arithmetic is the same), run sums to rounding.
func TestVecReduceTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, path := range vecPaths() {
		t.Run(path, func(t *testing.T) {
			onPath(t, path)
			for _, n := range vecLengths {
				x := randF32(r, n, -1e3, 1e3, false)
				s0 := make([]float64, n)
				for i := range s0 {
					s0[i] = 1e6 * r.Float64()
				}
				s, c := append([]float64(nil), s0...), make([]float64, n)
				ws, wc := append([]float64(nil), s0...), make([]float64, n)
				for range 3 {
					k := sumColumnsVec(x, s, c)
					sweepColumns(passSum, x, k, 1, s[k:], c[k:], nil, nil, 0)
					onPath(t, "go")
					sweepColumns(passSum, x, 0, 1, ws, wc, nil, nil, 0)
					onPath(t, path)
				}
				for i := range s {
					if s[i] != ws[i] || c[i] != wc[i] {
						t.Fatalf("columns n=%d, %d: %v+%v, want %v+%v", n, i, s[i], c[i], ws[i], wc[i])
					}
				}
				a := acc{s: 0.5, i: -1}
				sweepRun(passSum, x, 0, 1, n, 0, 0, &a)
				onPath(t, "go")
				w := acc{s: 0.5, i: -1}
				sweepRun(passSum, x, 0, 1, n, 0, 0, &w)
				onPath(t, path)
				if math.Abs(a.value()-w.value()) > 1e-12*(1+math.Abs(w.value())) {
					t.Fatalf("run n=%d: %v, want %v", n, a.value(), w.value())
				}
			}
		})
	}
}

// TestVecSoftmaxLayerNormTwins compares the vector softmax and layer
// normalisation rows with the Go loops.
func TestVecSoftmaxLayerNormTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, path := range vecPaths() {
		t.Run(path, func(t *testing.T) {
			onPath(t, path)
			for _, n := range vecLengths[1:] {
				x := randF32(r, n, -30, 30, false)
				got, want := make([]float32, n), make([]float32, n)
				if !softmaxRowVec(got, x) {
					t.Fatalf("no vector softmax")
				}
				softmaxRow(want, x, false)
				// The exponent x − max rounds to float32: a relative error
				// of |x − max|·2⁻²⁴.
				for i := range got {
					if !closeF32(got[i], want[i], 6e-6, 1e-37) {
						t.Fatalf("softmax n=%d, %d: %v, want %v", n, i, got[i], want[i])
					}
				}
				dy := randF32(r, n, -1, 1, false)
				if !softmaxGradRowVec(got, want, dy) {
					t.Fatalf("no vector softmax gradient")
				}
				wg := make([]float32, n)
				softmaxGradRow(wg, want, dy, false)
				for i := range got {
					if !closeF32(got[i], wg[i], 1e-6, 1e-9) {
						t.Fatalf("softmax gradient n=%d, %d: %v, want %v", n, i, got[i], wg[i])
					}
				}
				// A row with a NaN or an infinity is left to the Go loop.
				x[n/2] = float32(math.Inf(1))
				if softmaxRowVec(got, x) {
					t.Fatalf("vector softmax of a row with +Inf")
				}

				x = randF32(r, n, -3, 5, false)
				w, b := randF32(r, n, 0.5, 2, false), randF32(r, n, -1, 1, false)
				mu, rs, ok := layerNormRowVec(got, x, w, b, 1e-5)
				if !ok {
					t.Fatalf("no vector layer norm")
				}
				wm, wr := make([]float32, 1), make([]float32, 1)
				layerNormRows(want, wm, wr, x, w, b, 1, n, 1e-5)
				if !closeF32(float32(mu), wm[0], 1e-6, 1e-6) || !closeF32(float32(rs), wr[0], 1e-6, 0) {
					t.Fatalf("layer norm n=%d: statistics %v, %v, want %v, %v", n, mu, rs, wm[0], wr[0])
				}
				for i := range got {
					if !closeF32(got[i], want[i], 1e-6, 1e-6) {
						t.Fatalf("layer norm n=%d, %d: %v, want %v", n, i, got[i], want[i])
					}
				}
				pw, pb := make([]float64, n), make([]float64, n)
				g, xh := make([]float64, n), make([]float64, n)
				if !layerNormGradRowVec(got, dy, x, w, pw, pb, g, xh, mu, rs) {
					t.Fatalf("no vector layer norm gradient")
				}
				wdw, wdb := make([]float32, n), make([]float32, n)
				layerNormGradRows(want, wdw, wdb, dy, x, w, []float32{float32(mu)}, []float32{float32(rs)}, 1, n)
				for i := range got {
					if !closeF32(got[i], want[i], 1e-5, 1e-6) || !closeF32(float32(pw[i]), wdw[i], 1e-6, 1e-7) || !closeF32(float32(pb[i]), wdb[i], 0, 0) {
						t.Fatalf("layer norm gradient n=%d, %d: dx %v dw %v db %v, want %v %v %v", n, i, got[i], pw[i], pb[i], want[i], wdw[i], wdb[i])
					}
				}
			}
		})
	}
}

// TestVecThreadInvariant checks that the vector kernels give the same bits
// on one goroutine as on several, on every path.
func TestVecThreadInvariant(t *testing.T) {
	dev := New()
	shape := backend.Shape{16, 32, 24, 24}
	n := shape.NumElements()
	r := rand.New(rand.NewPCG(21, 22))
	alloc := func(s backend.Shape, vals []float32) backend.View {
		buf, err := dev.Alloc(4 * s.NumElements())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Free(buf) })
		v := backend.Contiguous(buf, backend.Float32, s)
		copy(F32(v), vals)
		return v
	}
	x := alloc(shape, randF32(r, n, -3, 3, false))
	g := alloc(shape, randF32(r, n, -1, 1, false))
	c := backend.Shape{32}
	w, b := alloc(c, randF32(r, 32, 0.5, 1.5, false)), alloc(c, randF32(r, 32, -1, 1, false))
	run := func() [][]float32 {
		y, dx, gelu, geluGrad := alloc(shape, nil), alloc(shape, nil), alloc(shape, nil), alloc(shape, nil)
		sm, sis, dw, db, sum := alloc(c, nil), alloc(c, nil), alloc(c, nil), alloc(c, nil), alloc(c, nil)
		p := backend.NormParams{Eps: 1e-5, Training: true}
		for _, err := range []error{
			dev.BatchNormReLU(y, sm, sis, x, w, b, backend.View{}, backend.View{}, p),
			dev.BatchNormReLUBackward(dx, dw, db, g, y, x, w, sm, sis, p),
			dev.Unary(backend.GELU, gelu, x, 0),
			dev.Binary(backend.GELUGrad, geluGrad, g, x),
			dev.Reduce(backend.Sum, sum, x, []int{0, 2, 3}, backend.ReduceParams{}),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		var out [][]float32
		for _, v := range []backend.View{y, dx, gelu, geluGrad, sm, sis, dw, db, sum} {
			out = append(out, append([]float32(nil), F32(v)[:v.NumElements()]...))
		}
		return out
	}
	for _, path := range KernelPaths() {
		onPath(t, path)
		old := runtime.GOMAXPROCS(1)
		one := run()
		runtime.GOMAXPROCS(3)
		three := run()
		runtime.GOMAXPROCS(old)
		for i := range one {
			for j := range one[i] {
				if math.Float32bits(one[i][j]) != math.Float32bits(three[i][j]) {
					t.Fatalf("%s: output %d, element %d: %v on one goroutine, %v on three", path, i, j, one[i][j], three[i][j])
				}
			}
		}
	}
}
