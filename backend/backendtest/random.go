package backendtest

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"

	"github.com/flockml/flock/backend"
)

// The suite pins the layout of the counter-based stream, so that every
// backend draws the same numbers for a (seed, offset):
//
//   - key (uint32(seed), uint32(seed>>32)); stream position j = Offset+i is
//     lane j%4 of block b = j/4, the Philox4x32-10 output W of counter
//     (uint32(b), uint32(b>>32), 0, 0); float64 draws also use V, the output
//     of counter (uint32(b), uint32(b>>32), 1, 0);
//   - float32 uniform (w>>8)·2⁻²⁴; float64 uniform ((w>>5)·2²⁶ + (v>>6))·2⁻⁵³;
//   - Uniform(A, B) = A + (B−A)·u; Normal(A, B) = A + B·z, z from Box–Muller
//     on lanes (0, 1) and (2, 3): r = √(−2 ln(1−u_even)),
//     z = r·cos(2π·u_odd) on the even lane and r·sin(2π·u_odd) on the odd one;
//   - Dropout drops i iff the float32 uniform of position j is < prob.

func init() {
	register("Random", checkRandom)
	register("Dropout", checkDropout)
}

// philoxRef is Philox4x32-10 written from the paper's definition: ten
// rounds of S-box multiplications, the key bumped by the Weyl constants
// between rounds.
func philoxRef(ctr [4]uint32, key [2]uint32) [4]uint32 {
	const (
		mA, mB = 0xD2511F53, 0xCD9E8D57
		wA, wB = 0x9E3779B9, 0xBB67AE85
	)
	x := ctr
	k := key
	for round := 1; round <= 10; round++ {
		hiA, loA := bits.Mul32(mA, x[0])
		hiB, loB := bits.Mul32(mB, x[2])
		x[0], x[1], x[2], x[3] = hiB^x[1]^k[0], loB, hiA^x[3]^k[1], loA
		k[0] += wA
		k[1] += wB
	}
	return x
}

// refStream computes stream positions by the layout above.
type refStream struct{ seed uint64 }

func (s refStream) words(j uint64, second uint32) uint32 {
	b := j / 4
	out := philoxRef([4]uint32{uint32(b), uint32(b >> 32), second, 0}, [2]uint32{uint32(s.seed), uint32(s.seed >> 32)})
	return out[j%4]
}

func (s refStream) uniform(j uint64, dt backend.DType) float64 {
	w := s.words(j, 0)
	if dt == backend.Float32 {
		return float64(w>>8) / (1 << 24)
	}
	v := s.words(j, 1)
	return (float64(w>>5)*(1<<26) + float64(v>>6)) / (1 << 53)
}

func (s refStream) normal(j uint64, dt backend.DType) float64 {
	even := j &^ 1
	u1, u2 := s.uniform(even, dt), s.uniform(even+1, dt)
	r := math.Sqrt(-2 * math.Log(1-u1))
	if j%2 == 0 {
		return r * math.Cos(2*math.Pi*u2)
	}
	return r * math.Sin(2*math.Pi*u2)
}

func (e *Env) draw(dt backend.DType, n int, p backend.RandomParams) []float64 {
	e.T.Helper()
	dst := e.Alloc(dt, backend.Shape{n})
	if err := e.B.Random(dst, p); err != nil {
		e.T.Fatalf("Random %v %+v: %v", dt, p, err)
	}
	return e.Get(dst)
}

func checkRandom(e *Env) {
	// Known answers of Random123 (kat_vectors) for the reference itself.
	kat := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{}, [2]uint32{}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, k := range kat {
		if got := philoxRef(k.ctr, k.key); got != k.want {
			e.T.Fatalf("reference Philox4x32-10(%x, key %x) = %x, want %x", k.ctr, k.key, got, k.want)
		}
	}

	params := []backend.RandomParams{
		{Kind: backend.Uniform, A: 0, B: 1, Seed: 0, Offset: 0},
		{Kind: backend.Uniform, A: -2, B: 3, Seed: 0xdeadbeefcafef00d, Offset: 5},
		{Kind: backend.Uniform, A: 0, B: 1, Seed: 7, Offset: 1<<34 + 3},
		{Kind: backend.Normal, A: 0, B: 1, Seed: 42, Offset: 0},
		{Kind: backend.Normal, A: 1.5, B: 0.25, Seed: 1 << 40, Offset: 6},
		{Kind: backend.Normal, A: 0, B: 1, Seed: 3, Offset: 1<<33 + 1},
	}
	for _, dt := range FloatTypes {
		for _, p := range params {
			for _, n := range []int{0, 1, 3, 4, 5, 17, 1000} {
				got := e.draw(dt, n, p)
				want := make([]float64, n)
				st := refStream{p.Seed}
				for i := range want {
					j := p.Offset + uint64(i)
					if p.Kind == backend.Uniform {
						want[i] = Round(dt, p.A+(p.B-p.A)*st.uniform(j, dt))
					} else {
						want[i] = Round(dt, p.A+p.B*st.normal(j, dt))
					}
				}
				rtol := 0.0
				if p.Kind == backend.Normal {
					rtol = Tol(dt)
				}
				e.Close(fmt.Sprintf("Random %v %+v n=%d", dt, p, n), got, want, rtol, Tol(dt)*1e-3)
			}
		}
		// A window of the stream equals the same positions drawn as part of
		// a longer call.
		for _, kind := range []backend.RandomKind{backend.Uniform, backend.Normal} {
			all := e.draw(dt, 300, backend.RandomParams{Kind: kind, A: 0, B: 1, Seed: 9})
			part := e.draw(dt, 101, backend.RandomParams{Kind: kind, A: 0, B: 1, Seed: 9, Offset: 37})
			e.Close(fmt.Sprintf("Random %v kind %d window", dt, kind), part, all[37:138], 0, 0)
		}
		// Statistics of 10⁵ draws.
		const n = 100000
		u := e.draw(dt, n, backend.RandomParams{Kind: backend.Uniform, A: 2, B: 5, Seed: 123})
		mean, std, lo, hi := moments(u)
		if math.Abs(mean-3.5) > 0.02 || math.Abs(std-math.Sqrt(0.75)) > 0.01 || lo < 2 || hi >= 5 {
			e.T.Errorf("Random %v U[2,5): mean %v, std %v, range [%v, %v]", dt, mean, std, lo, hi)
		}
		z := e.draw(dt, n, backend.RandomParams{Kind: backend.Normal, A: -1, B: 2, Seed: 321})
		mean, std, _, _ = moments(z)
		if math.Abs(mean+1) > 0.04 || math.Abs(std-2) > 0.03 {
			e.T.Errorf("Random %v N(-1, 2²): mean %v, std %v", dt, mean, std)
		}
		// Different seeds give different streams.
		a := e.draw(dt, 64, backend.RandomParams{Kind: backend.Uniform, B: 1, Seed: 1})
		b := e.draw(dt, 64, backend.RandomParams{Kind: backend.Uniform, B: 1, Seed: 2})
		same := 0
		for i := range a {
			if a[i] == b[i] {
				same++
			}
		}
		if same > 2 {
			e.T.Errorf("Random %v: seeds 1 and 2 agree on %d of 64 draws", dt, same)
		}
		// The thread count does not matter.
		for _, kind := range []backend.RandomKind{backend.Uniform, backend.Normal} {
			p := backend.RandomParams{Kind: kind, A: 0, B: 1, Seed: 77, Offset: 2}
			prev := runtime.GOMAXPROCS(1)
			one := e.draw(dt, 1<<18+3, p)
			runtime.GOMAXPROCS(2)
			two := e.draw(dt, 1<<18+3, p)
			runtime.GOMAXPROCS(prev)
			e.Close(fmt.Sprintf("Random %v kind %d, 1 vs 2 threads", dt, kind), two, one, 0, 0)
		}
	}
	if err := e.B.Random(e.Alloc(backend.Int32, backend.Shape{4}), backend.RandomParams{B: 1}); err == nil {
		e.T.Errorf("Random into int32: no error")
	}
}

func moments(xs []float64) (mean, std, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		mean += x
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs))), lo, hi
}

func checkDropout(e *Env) {
	masks := map[string][]float64{}
	for _, dt := range FloatTypes {
		for _, s := range []backend.Shape{{}, {0}, {1}, {7}, {33, 65}, {3, 257, 129}} {
			for _, prob := range []float64{0, 0.1, 0.5, 1} {
				const seed, offset = 0x1234567890, 6
				x, xv := e.Random(dt, s, false, -2, 2)
				for _, inPlace := range []bool{false, true} {
					if inPlace {
						e.Set(x, xv)
					}
					dst := x
					if !inPlace {
						dst = e.Alloc(dt, s)
					}
					mask := e.Alloc(backend.Bool, s)
					what := fmt.Sprintf("Dropout %v%v p=%v in place=%v", dt, s, prob, inPlace)
					if err := e.B.Dropout(dst, mask, x, prob, seed, offset); err != nil {
						e.T.Fatalf("%s: %v", what, err)
					}
					st := refStream{seed}
					wantMask := make([]float64, len(xv))
					want := make([]float64, len(xv))
					kept := 0
					for i := range xv {
						if st.uniform(offset+uint64(i), backend.Float32) >= prob {
							wantMask[i] = 1
							want[i] = Round(dt, xv[i]*Round(dt, 1/(1-prob)))
							kept++
						}
					}
					e.Close(what+" mask", e.Get(mask), wantMask, 0, 0)
					e.Close(what, e.Get(dst), want, Tol(dt), 0)
					key := fmt.Sprint(s, prob)
					if m, ok := masks[key]; ok {
						e.Close(what+" mask as for float32", wantMask, m, 0, 0)
					}
					masks[key] = e.Get(mask)
					if n := len(xv); n > 10000 {
						if frac := float64(kept) / float64(n); math.Abs(frac-(1-prob)) > 0.01 {
							e.T.Errorf("%s: kept %v of the elements", what, frac)
						}
					}
				}
			}
		}
	}
	x := e.Alloc(backend.Float32, backend.Shape{4})
	if err := e.B.Dropout(x, e.Alloc(backend.Bool, backend.Shape{4}), x, 1.5, 0, 0); err == nil {
		e.T.Errorf("Dropout with p = 1.5: no error")
	}
}
