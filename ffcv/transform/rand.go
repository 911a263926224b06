package transform

import (
	"math"
	"math/bits"

	"github.com/flockml/flock/internal/philox"
)

// Rand is a counter-based random stream: Philox4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011) keyed by the run's
// seed and the epoch, with the sample index and an operation id in the
// counter. The n-th block of 128 bits of the stream for (seed, epoch, sample,
// op) is
//
//	Philox4x32-10(key = K, counter = (n, op, sample mod 2³², sample ≫ 32))
//	K = splitmix64(seed ⊕ splitmix64(epoch))
//
// where splitmix64 is SplitMix64's output function (add 0x9e3779b97f4a7c15,
// then the two xor-shift-multiply rounds) and K's low 32 bits are the first
// key word. Uint64 returns the block's words (w0 | w1≪32), then (w2 | w3≪32).
// Every draw is a pure function of (seed, epoch, sample, op) and the number
// of draws before it, so augmentations never depend on how samples are spread
// over workers. A Rand is a small value: copy it to fork a stream, pass a
// pointer to draw from it. It is not safe for concurrent use.
type Rand struct {
	key [2]uint32
	ctr [4]uint32
	buf [4]uint32
	pos int // next unread word of buf; 4 means empty
}

// NewRand returns the stream for (seed, epoch, sample, op).
func NewRand(seed, epoch, sample uint64, op uint32) Rand {
	k := splitmix64(seed ^ splitmix64(epoch))
	return Rand{
		key: [2]uint32{uint32(k), uint32(k >> 32)},
		ctr: [4]uint32{0, op, uint32(sample), uint32(sample >> 32)},
		pos: 4,
	}
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func (r *Rand) refill() {
	r.buf = philox.Block(r.ctr, r.key)
	r.ctr[0]++
	r.pos = 0
}

// Uint32 returns the next 32 random bits.
func (r *Rand) Uint32() uint32 {
	if r.pos >= 4 {
		r.refill()
	}
	v := r.buf[r.pos]
	r.pos++
	return v
}

// Uint64 returns the next 64 random bits (two words, low word first; a pending
// odd word is skipped so that 64-bit draws stay block-aligned).
func (r *Rand) Uint64() uint64 {
	if r.pos&1 != 0 {
		r.pos++
	}
	if r.pos >= 4 {
		r.refill()
	}
	v := uint64(r.buf[r.pos]) | uint64(r.buf[r.pos+1])<<32
	r.pos += 2
	return v
}

// Float64 returns a uniform number in [0, 1) with 53 random bits.
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * (1.0 / (1 << 53))
}

// Uniform returns a uniform number in [a, b).
func (r *Rand) Uniform(a, b float64) float64 {
	return a + (b-a)*r.Float64()
}

// Intn returns a uniform integer in [0, n) (Lemire's multiply-shift with
// rejection, so without modulo bias). It panics if n ≤ 0.
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		panic("transform: Rand.Intn: n must be positive")
	}
	un := uint64(n)
	hi, lo := bits.Mul64(r.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), un)
		}
	}
	return int(hi)
}

// Bool returns true with probability p.
func (r *Rand) Bool(p float64) bool { return r.Float64() < p }

// Normal returns a standard normal deviate (Marsaglia's polar method).
func (r *Rand) Normal() float64 {
	for {
		u := 2*r.Float64() - 1
		v := 2*r.Float64() - 1
		s := u*u + v*v
		if s > 0 && s < 1 {
			return u * math.Sqrt(-2*math.Log(s)/s)
		}
	}
}

// Gamma returns a Gamma(shape, 1) deviate (Marsaglia and Tsang, "A simple
// method for generating gamma variables", 2000; shape < 1 via the
// Gamma(shape+1)·U^(1/shape) boost). It panics if shape ≤ 0.
func (r *Rand) Gamma(shape float64) float64 {
	if !(shape > 0) {
		panic("transform: Rand.Gamma: shape must be positive")
	}
	boost := 1.0
	if shape < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		boost = math.Pow(u, 1/shape)
		shape++
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.Normal()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || (u > 0 && math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v))) {
			return d * v * boost
		}
	}
}

// Beta returns a Beta(a, b) deviate as X/(X+Y) with X ~ Gamma(a), Y ~ Gamma(b).
func (r *Rand) Beta(a, b float64) float64 {
	x := r.Gamma(a)
	y := r.Gamma(b)
	if x+y == 0 {
		// Both underflowed (tiny shapes): the limit puts all mass on {0, 1}.
		if r.Float64() < a/(a+b) {
			return 1
		}
		return 0
	}
	return x / (x + y)
}
