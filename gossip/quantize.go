package gossip

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// Quantizer is the lattice quantizer with which Swarm SGD exchanges models
// (Nadiradze, Sabour, Davies, Li and Alistarh, 2021, §3;
// Davies, Gurunathan, Moshrefi, Ashkboos and Alistarh, 2021, "New bounds
// for distributed mean estimation and variance reduction"). The sender
// sends, per coordinate, its grid point modulo q = 2^Bits; the receiver
// decodes against its own copy ref of the model, taking the point of that
// residue class nearest ref:
//
//	k = round(x/s)                    the grid point, an integer (halves to even)
//	c = k mod q                       the code, in [0, q), Bits bits on the wire
//	k̂ = q·⌊ref/(q·s) − c/q + ½⌋ + c   decode(c, ref) = s·k̂
//
// k̂ is the one integer ≡ c (mod q) with k̂ − q/2 ≤ ref/s < k̂ + q/2, so the
// decode is exact, k̂ = k, if and only if
//
//	−q/2 ≤ ref/s − round(x/s) < q/2,                                 (1)
//
// and then |s·k̂ − x| = s·|k − x/s| ≤ s/2. As |x/s − k| ≤ ½, (1) holds for
// every coordinate whenever
//
//	‖x − ref‖∞ < (q−1)·s/2 = Radius().                               (2)
//
// (2) is strict: at ‖x − ref‖∞ = (q−1)·s/2 the decode can be off by q·s.
// The looser ‖x − ref‖∞ < q·s/2 does not suffice: with q = 2, s = 1,
// x = 0.6 (k = 1) and ref = −0.3, (1) fails and the decode is −1.
//
// # Arithmetic
//
// x/s and ref/s are taken in float64, and k̂ is exactly the class member
// above for the float64 ref/s (Decode corrects the formula's roundings by
// an exact comparison), so (1) holds as stated with x/s and ref/s their
// float64 quotients, and (2) implies (1) up to their rounding, a relative
// 2^-53. In float32 the quotient would round across half-steps and could
// not hold k beyond 2^24. With Scale a power of two (as ScaleFor picks it)
// the quotients are exact and so is the decoded value s·k̂ as a float32
// (barring overflow past math.MaxFloat32): under (1) the decoded
// coordinate is within s/2 of x, exactly. Any other scale adds the float64
// rounding of the quotients and of s·k̂ (relative 2^-52) and the rounding
// of s·k̂ to float32, up to half a float32 ulp of the decoded value: within
// s/2 + ½ulp₃₂ of x, the best a float32 can do when the grid points s·k
// are not float32 numbers.
//
// The grid must fit float64's integers: a coordinate with x/s or ref/s
// not finite or of magnitude 2^52 or more is not decoded, and shows up as
// a violation, below. For finite data that takes s below 2^-52 of the
// coordinate's magnitude, far finer than a float32 resolves.
//
// # Violations
//
// The receiver does not know x, so the codes alone cannot tell it that a
// coordinate wrapped (k̂ = k ± q, ± 2q, …). The message therefore ends
// with an 8-byte checksum of the un-wrapped grid points,
//
//	H(k) = Σ_i (k_i + 2^53)·r^(n−1−i) mod p,   p = 2^61 − 1,
//
// a polynomial hash over the prime field F_p evaluated at a point r that
// Key determines; both sides must use the same Key. A coordinate the
// sender cannot encode enters H as 2^55, a value no decoded coordinate
// takes. The receiver hashes its k̂ and reports a violation when the
// checksums differ, or when it could not decode a coordinate. Equal
// vectors hash equally, so an exact decode is never reported. Unequal ones
// are polynomials of degree below n in r that agree at no more than n−1
// points (their coefficients, below 2^56, differ modulo p), so a decode
// with any coordinate off — that is, (1) failing anywhere — goes unreported
// with probability at most (n−1)·9/2^64 < n·2^-60 over a Key drawn
// uniformly at random independently of the data (r = SplitMix64(Key) mod
// p, and each residue has at most 9 preimages): under 10^-10 for a model
// of 10^8 coordinates. The same holds for codes corrupted on the way.
// Nothing tells which coordinates wrapped, so after a violation the
// exchange has to be repeated at full precision.
type Quantizer struct {
	// Bits is the number of bits per coordinate, 1 to 16: q = 2^Bits codes.
	Bits int
	// Scale is the grid step s > 0 (finite); the error is s/2 per
	// coordinate within Radius, and a power of two keeps it exact.
	Scale float64
	// Key picks the checksum's evaluation point; sender and receiver must
	// agree on it, and the probability bound on missed violations is over
	// a Key drawn at random independently of the models (e.g. from the
	// run's seed).
	Key uint64
}

const (
	// checksumSize is the bytes of checksum that end every message.
	checksumSize = 8
	// gridLimit bounds |x/s| and |ref/s|: below it the grid points, k̂ ± q/2
	// included, are float64 integers and fit an int64.
	gridLimit = 1 << 52
	// hashOffset makes every grid point's hash coefficient k + 2^53
	// non-negative: |k| ≤ 2^52 + 2^15 on both sides.
	hashOffset = 1 << 53
	// unencodable is the hash coefficient of a coordinate the sender could
	// not encode: above every k + hashOffset, below p.
	unencodable = 1 << 55
	// mersenne61 is the checksum's field modulus p = 2^61 − 1.
	mersenne61 = 1<<61 - 1
)

func (qz Quantizer) check() {
	if qz.Bits < 1 || qz.Bits > 16 {
		panic("gossip: quantizer bits out of 1..16")
	}
	if !(qz.Scale > 0) || math.IsInf(qz.Scale, 0) {
		panic("gossip: quantizer scale not positive and finite")
	}
}

// Radius returns (q−1)·s/2: a decode against a reference closer than this
// to x, ‖x − ref‖∞ < Radius(), is exact, condition (2) of Quantizer.
func (qz Quantizer) Radius() float64 {
	qz.check()
	return float64(int(1)<<qz.Bits-1) * qz.Scale / 2
}

// ScaleFor returns the finest power-of-two scale at which a Quantizer of
// the given bits decodes exactly whenever ‖x − ref‖∞ ≤ bound: the smallest
// s = 2^e with bound < (q−1)·s/2. The decoded error is then at most s/2,
// which lies in (bound/(q−1), 2·bound/(q−1)].
//
// bound has to come from what the sender knows, as x is its model and ref
// its partner's: a bound on the models' spread from the analysis, or an
// estimate such as twice the distance its own model moved since the two
// last averaged (the partner moves too, by steps of the same size). An
// estimate that falls short shows up as a violation, not as a silent error.
func ScaleFor(bits int, bound float64) float64 {
	if bits < 1 || bits > 16 {
		panic("gossip: quantizer bits out of 1..16")
	}
	if !(bound > 0) || math.IsInf(bound, 0) {
		panic("gossip: quantizer bound not positive and finite")
	}
	half := float64(int(1)<<bits-1) / 2 // half·s is exact
	_, e := math.Frexp(bound)           // bound < 2^e
	s := math.Ldexp(1, e)
	for half*s <= bound {
		s *= 2
	}
	for half*(s/2) > bound {
		s /= 2
	}
	return s
}

// EncodedSize returns the bytes of a message carrying n coordinates: the
// codes, ⌈n·Bits/8⌉ bytes, and the 8-byte checksum. It is what one
// direction of a quantized exchange sends.
func (qz Quantizer) EncodedSize(n int) int {
	qz.check()
	if n < 0 {
		panic("gossip: negative number of coordinates")
	}
	return (n*qz.Bits+7)/8 + checksumSize
}

// Encode returns the message for x: the codes c_i = round(x_i/s) mod q,
// packed Bits bits each from the least significant bit of the first byte
// on (code i occupies bits i·Bits … i·Bits+Bits−1 of the little-endian
// bit stream; the last byte's spare bits are 0), then the checksum of the
// grid points round(x_i/s), little-endian. Its length is EncodedSize(len(x)).
// A coordinate with x_i/s not finite or of magnitude 2^52 or more is sent
// as code 0 and enters the checksum as no decode can, so the receiver
// reports a violation (with the probability bounded in Quantizer).
func (qz Quantizer) Encode(x []float32) []byte {
	qz.check()
	msg := make([]byte, qz.EncodedSize(len(x)))
	mask := uint64(1)<<qz.Bits - 1
	r := hashPoint(qz.Key)
	var sum, acc uint64
	nacc, o := 0, 0
	for _, xi := range x {
		u := float64(xi) / qz.Scale
		var c, a uint64
		if math.Abs(u) < gridLimit {
			k := int64(math.RoundToEven(u))
			c, a = uint64(k)&mask, uint64(k+hashOffset)
		} else {
			a = unencodable
		}
		sum = hashStep(sum, r, a)
		acc |= c << nacc
		for nacc += qz.Bits; nacc >= 8; nacc -= 8 {
			msg[o] = byte(acc)
			acc >>= 8
			o++
		}
	}
	if nacc > 0 {
		msg[o] = byte(acc)
	}
	binary.LittleEndian.PutUint64(msg[len(msg)-checksumSize:], sum)
	return msg
}

// Decode decodes msg, Encode's message for some x, against the reference
// ref into out, which must have ref's length: out_i = s·k̂_i, k̂_i the
// integer ≡ c_i (mod q) with k̂_i − q/2 ≤ ref_i/s < k̂_i + q/2 (NaN where
// ref_i/s is not finite or of magnitude 2^52 or more). It reports a
// violation when a coordinate could not be decoded or the checksum of the
// k̂_i differs from the sender's: some coordinate failed condition (1) of
// Quantizer, so out is not within the error bound, or the message was
// damaged. Without a violation every out_i is within s/2 of x_i (exactly
// for a power-of-two scale; see Quantizer for others), except with the
// probability bounded there. It returns an error, and leaves out
// unspecified, when msg is not a message for len(ref) coordinates of Bits
// bits.
func (qz Quantizer) Decode(msg []byte, ref, out []float32) (violated bool, err error) {
	qz.check()
	if len(out) != len(ref) {
		panic("gossip: decode: output and reference lengths differ")
	}
	n := len(ref)
	if want := qz.EncodedSize(n); len(msg) != want {
		return false, fmt.Errorf("gossip: decode: message of %d bytes, want %d for %d coordinates of %d bits", len(msg), want, n, qz.Bits)
	}
	codes := msg[:len(msg)-checksumSize]
	if spare := n * qz.Bits % 8; spare != 0 && codes[len(codes)-1]>>spare != 0 {
		return false, fmt.Errorf("gossip: decode: spare bits of the last code byte are not zero")
	}
	q := float64(int(1) << qz.Bits)
	half := q / 2
	mask := uint64(1)<<qz.Bits - 1
	r := hashPoint(qz.Key)
	var sum, acc uint64
	nacc, o := 0, 0
	for i, ri := range ref {
		for nacc < qz.Bits {
			acc |= uint64(codes[o]) << nacc
			nacc += 8
			o++
		}
		c := float64(acc & mask)
		acc >>= qz.Bits
		nacc -= qz.Bits
		v := float64(ri) / qz.Scale
		if !(math.Abs(v) < gridLimit) {
			violated = true
			out[i] = float32(math.NaN())
			continue
		}
		// The spec's formula gives k̂ with v < k̂ + q/2, as its roundings
		// are monotone and the half-steps are float64 numbers, but v − c
		// and the + ½ can round up onto a half-step and make k̂ one class
		// too high; comparing v with k̂ − q/2, an integer below 2^53, is
		// exact.
		k := c + q*math.Floor((v-c)/q+0.5)
		for v < k-half {
			k -= q
		}
		out[i] = float32(k * qz.Scale)
		sum = hashStep(sum, r, uint64(int64(k)+hashOffset))
	}
	if sum != binary.LittleEndian.Uint64(msg[len(msg)-checksumSize:]) {
		violated = true
	}
	return violated, nil
}

// hashPoint returns the checksum's evaluation point r = SplitMix64(key)
// mod p. SplitMix64 is a bijection of uint64, so a uniform key gives each
// residue with probability at most 9/2^64 (2^64 = 8p + 8), and nearby
// keys (0, 1, 2, …) give unrelated points.
func hashPoint(key uint64) uint64 {
	key += 0x9e3779b97f4a7c15
	key = (key ^ key>>30) * 0xbf58476d1ce4e5b9
	key = (key ^ key>>27) * 0x94d049bb133111eb
	return (key ^ key>>31) % mersenne61
}

// hashStep returns h·r + a mod p, one Horner step of the checksum, for
// h, r < p and a < 2^63.
func hashStep(h, r, a uint64) uint64 {
	hi, lo := bits.Mul64(h, r) // h·r < 2^122
	// h·r = (hi·2^3 + lo>>61)·2^61 + (lo mod 2^61), and 2^61 ≡ 1 (mod p).
	x := (hi<<3 | lo>>61) + lo&mersenne61
	x = x&mersenne61 + x>>61
	if x >= mersenne61 {
		x -= mersenne61
	}
	x += a
	for x >= mersenne61 {
		x -= mersenne61
	}
	return x
}
