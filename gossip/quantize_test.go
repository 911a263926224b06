package gossip_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flockml/flock/gossip"
)

// ulp32 returns the spacing of float32 numbers just above |v|.
func ulp32(v float32) float64 {
	a := float32(math.Abs(float64(v)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// isPow2 reports whether s is a power of two.
func isPow2(s float64) bool {
	f, _ := math.Frexp(s)
	return f == 0.5
}

// tolerance returns the error Quantizer promises for a decoded coordinate
// out of x: s/2 for a power-of-two scale, else s/2 plus half a float32 ulp
// of out plus float64 rounding.
func tolerance(s float64, x, out float32) float64 {
	if isPow2(s) {
		return s / 2
	}
	return s/2 + ulp32(out)/2 + 0x1p-52*(math.Abs(float64(x))+s)
}

// near returns x with each coordinate moved by at most frac·radius, and
// checks that it did not move further after rounding to float32.
func near(t *testing.T, rng *rand.Rand, x []float32, radius, frac float64) []float32 {
	t.Helper()
	ref := make([]float32, len(x))
	for i, xi := range x {
		ref[i] = float32(float64(xi) + (2*rng.Float64()-1)*frac*radius)
		if d := math.Abs(float64(ref[i]) - float64(xi)); d >= radius {
			t.Fatalf("reference %d is %g from x, not within the radius %g", i, d, radius)
		}
	}
	return ref
}

func decode(t *testing.T, qz gossip.Quantizer, msg []byte, ref []float32) ([]float32, bool) {
	t.Helper()
	out := make([]float32, len(ref))
	violated, err := qz.Decode(msg, ref, out)
	if err != nil {
		t.Fatalf("%+v: Decode: %v", qz, err)
	}
	return out, violated
}

// TestQuantizerErrorBound checks that with ‖x − ref‖∞ inside the radius
// (q−1)·s/2 the decode recovers the grid point round(x/s) exactly, so
// every coordinate is within s/2 of x (plus float32 rounding for scales
// that are not powers of two), and nothing is reported.
func TestQuantizerErrorBound(t *testing.T) {
	t.Parallel()
	for _, bits := range []int{1, 2, 4, 8, 16} {
		for _, s := range []float64{0x1p-12, 0x1p-6, 1, 0.01, 0.37} {
			qz := gossip.Quantizer{Bits: bits, Scale: s, Key: 42}
			rng := rand.New(rand.NewPCG(uint64(bits), math.Float64bits(s)))
			x := make([]float32, 1001)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
			}
			x[0], x[1] = 1e4, -1e4
			for _, frac := range []float64{0.5, 0.99} {
				ref := near(t, rng, x, qz.Radius(), frac)
				out, violated := decode(t, qz, qz.Encode(x), ref)
				if violated {
					t.Errorf("bits %d, s = %g, ‖x − ref‖∞ < %g·radius: violation reported", bits, s, frac)
				}
				for i := range x {
					if want := float32(s * math.RoundToEven(float64(x[i])/s)); out[i] != want {
						t.Fatalf("bits %d, s = %g: x[%d] = %g decodes to %g, want the grid point %g", bits, s, i, x[i], out[i], want)
					}
					if e := math.Abs(float64(out[i]) - float64(x[i])); e > tolerance(s, x[i], out[i]) {
						t.Fatalf("bits %d, s = %g: x[%d] = %g decodes to %g, error %g > %g", bits, s, i, x[i], out[i], e, tolerance(s, x[i], out[i]))
					}
				}
			}
		}
	}
}

// naive32 is the spec's encode and decode evaluated in float32.
func naive32(x, ref float32, s float64, bits int) float32 {
	s32, q := float32(s), float32(int(1)<<bits)
	k := float32(math.RoundToEven(float64(x / s32)))
	c := k - q*float32(math.Floor(float64(k/q)))
	m := float32(math.Floor(float64(ref/(q*s32)-c/q) + 0.5))
	return q*s32*m + s32*c
}

// TestQuantizerFloat64 checks the regime where a grid step is a few
// float32 ulps of the data: the spec's formula evaluated in float32 misses
// the bound on many coordinates, Quantizer's float64 arithmetic on none,
// and with a power-of-two scale it holds s/2 exactly.
func TestQuantizerFloat64(t *testing.T) {
	t.Parallel()
	for _, s := range []float64{1e-4, 0x1p-13} {
		qz := gossip.Quantizer{Bits: 8, Scale: s}
		rng := rand.New(rand.NewPCG(3, 4))
		x := make([]float32, 2000)
		for i := range x {
			x[i] = float32(1000 + 1000*rng.Float64()) // ulp 2^-14 or 2^-13
		}
		ref := near(t, rng, x, qz.Radius(), 0.5)
		out, violated := decode(t, qz, qz.Encode(x), ref)
		if violated {
			t.Errorf("s = %g: violation reported", s)
		}
		naiveBad := 0
		for i := range x {
			if e := math.Abs(float64(out[i]) - float64(x[i])); e > tolerance(s, x[i], out[i]) {
				t.Fatalf("s = %g: x[%d] = %g decodes to %g, error %g > %g", s, i, x[i], out[i], e, tolerance(s, x[i], out[i]))
			}
			y := naive32(x[i], ref[i], s, qz.Bits)
			if math.Abs(float64(y)-float64(x[i])) > tolerance(s, x[i], y) {
				naiveBad++
			}
		}
		if s == 1e-4 && naiveBad < len(x)/10 {
			t.Errorf("s = %g: float32 arithmetic missed the bound on only %d of %d coordinates; the test no longer exercises the hazard", s, naiveBad, len(x))
		}
	}
}

// TestQuantizerBoundary checks condition (1), −q/2 ≤ ref/s − round(x/s) <
// q/2, at its ends for every width, with values whose quotients are exact.
func TestQuantizerBoundary(t *testing.T) {
	t.Parallel()
	const s = 0x1p-3
	for bits := 1; bits <= 16; bits++ {
		qz := gossip.Quantizer{Bits: bits, Scale: s}
		q := float64(int(1) << bits)
		for _, c := range []struct {
			name   string
			k      float64 // x = s·(k + ½): rounds to k for k even, k+1 for k odd
			d      float64 // ref = s·(k + d)
			wrap   float64 // decoded grid point − round(x/s)
			within bool    // ‖x − ref‖∞ < (q−1)·s/2
		}{
			{"ref/s − k = −q/2, decoded", 6, -q / 2, 0, false},
			{"ref/s − k = q/2, ‖x − ref‖∞ = radius, wraps", 6, q / 2, q, false},
			{"‖x − ref‖∞ = radius − s/4, decoded", 6, q/2 - 0.25, 0, true},
			{"‖x − ref‖∞ = q·s/2 − s/4, wraps", 5, 0.5 - q/2 + 0.25, -q, false},
		} {
			x := float32(s * (c.k + 0.5))
			ref := float32(s * (c.k + c.d))
			if dist := math.Abs(float64(x - ref)); (dist < qz.Radius()) != c.within {
				t.Fatalf("bits %d, %s: ‖x − ref‖∞ = %g against radius %g", bits, c.name, dist, qz.Radius())
			}
			out, violated := decode(t, qz, qz.Encode([]float32{x}), []float32{ref})
			grid := math.RoundToEven(c.k + 0.5)
			if want := float32(s * (grid + c.wrap)); out[0] != want {
				t.Errorf("bits %d, %s: decoded %g, want %g", bits, c.name, out[0], want)
			}
			if violated != (c.wrap != 0) {
				t.Errorf("bits %d, %s: violation %v", bits, c.name, violated)
			}
		}
	}
	// ref/s − round(x/s) = q/2 − 10^-20, decoded: ref/s − c rounds onto a
	// half-step, which the comparison with k̂ ± q/2 corrects.
	for bits := 1; bits <= 16; bits++ {
		qz := gossip.Quantizer{Bits: bits, Scale: s}
		x := float32(-s * float64(int(1)<<bits) / 2)
		out, violated := decode(t, qz, qz.Encode([]float32{x}), []float32{-1e-20 * s})
		if out[0] != x || violated {
			t.Errorf("bits %d, ref/s − k = q/2 − 10^-20: decoded %g, violation %v; want %g", bits, out[0], violated, x)
		}
	}
	// The example of Quantizer's documentation.
	qz := gossip.Quantizer{Bits: 1, Scale: 1}
	out, violated := decode(t, qz, qz.Encode([]float32{0.6}), []float32{-0.3})
	if out[0] != -1 || !violated {
		t.Errorf("q = 2, s = 1, x = 0.6, ref = −0.3: decoded %g, violation %v; want −1, reported", out[0], violated)
	}
}

// TestQuantizerViolations checks that the checksum reports every way a
// decode can go wrong (wrapped coordinates, including pairs whose errors
// cancel in a plain sum, coordinates neither side can represent, damaged
// messages, another key) and nothing when the decode is exact.
func TestQuantizerViolations(t *testing.T) {
	t.Parallel()
	const s = 0x1p-8
	for _, bits := range []int{1, 2, 4, 8, 16} {
		qz := gossip.Quantizer{Bits: bits, Scale: s, Key: uint64(bits) * 77}
		q := float64(int(1) << bits)
		rng := rand.New(rand.NewPCG(5, uint64(bits)))
		xs := make([]float32, 1001)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		base := near(t, rng, xs, qz.Radius(), 0.9)
		msg := qz.Encode(xs)
		if _, violated := decode(t, qz, msg, base); violated {
			t.Fatalf("bits %d: violation reported inside the radius", bits)
		}
		// wrapTo sets ref_i so that ref/s − round(x/s) = ±(q/2 + 1 + j):
		// the decode lands on round(x/s) ± q or further.
		wrapTo := func(ref []float32, i int, sign float64) {
			j := float64(rng.IntN(3 * int(q)))
			ref[i] = float32(s * (math.RoundToEven(float64(xs[i])/s) + sign*(q/2+1+j)))
		}
		for _, c := range []struct {
			name string
			edit func(ref, x []float32, msg []byte)
		}{
			{"one coordinate above", func(ref, _ []float32, _ []byte) { wrapTo(ref, 500, 1) }},
			{"one coordinate below", func(ref, _ []float32, _ []byte) { wrapTo(ref, 1000, -1) }},
			{"+q and −q", func(ref, _ []float32, _ []byte) {
				ref[3] = float32(s * (math.RoundToEven(float64(xs[3])/s) + q/2 + 1))
				ref[4] = float32(s * (math.RoundToEven(float64(xs[4])/s) - q/2 - 1))
			}},
			{"fifty", func(ref, _ []float32, _ []byte) {
				for i := range 50 {
					wrapTo(ref, 20*i, float64(1-2*(i%2)))
				}
			}},
			{"reference NaN", func(ref, _ []float32, _ []byte) { ref[7] = float32(math.NaN()) }},
			{"reference +Inf", func(ref, _ []float32, _ []byte) { ref[7] = float32(math.Inf(1)) }},
			{"x NaN", func(_, x []float32, _ []byte) { x[9] = float32(math.NaN()) }},
			{"x −Inf", func(_, x []float32, _ []byte) { x[9] = float32(math.Inf(-1)) }},
			{"x/s beyond 2^52", func(_, x []float32, _ []byte) { x[9] = 0x1p61 }},
			{"a code bit flipped", func(_, _ []float32, msg []byte) { msg[17] ^= 0x10 }},
			{"a checksum bit flipped", func(_, _ []float32, msg []byte) { msg[len(msg)-3] ^= 1 }},
		} {
			ref, x, msg := append([]float32(nil), base...), append([]float32(nil), xs...), append([]byte(nil), msg...)
			c.edit(ref, x, msg)
			if !slicesEqual(x, xs) { // the sender's model changed
				msg = qz.Encode(x)
			}
			out, violated := decode(t, qz, msg, ref)
			if !violated {
				t.Errorf("bits %d, %s: no violation reported", bits, c.name)
			}
			if c.name == "+q and −q" && (float64(out[3]-x[3]) < q*s/2 || float64(x[4]-out[4]) < q*s/2) {
				t.Errorf("bits %d, %s: decoded %g and %g from %g and %g, not wrapped", bits, c.name, out[3], out[4], x[3], x[4])
			}
		}
		other := qz
		other.Key++
		if _, violated := decode(t, other, msg, base); !violated {
			t.Errorf("bits %d: decoding with another key reported no violation", bits)
		}
	}
}

// TestQuantizerEncodedSize checks that EncodedSize is the length of the
// message, ⌈n·Bits/8⌉ bytes of codes and 8 of checksum.
func TestQuantizerEncodedSize(t *testing.T) {
	t.Parallel()
	for bits := 1; bits <= 16; bits++ {
		qz := gossip.Quantizer{Bits: bits, Scale: 0.1}
		for _, n := range []int{0, 1, 3, 7, 8, 9, 13, 1001} {
			got, want := qz.EncodedSize(n), (n*bits+7)/8+8
			if got != want {
				t.Errorf("bits %d, n = %d: EncodedSize %d, want %d", bits, n, got, want)
			}
			if m := len(qz.Encode(make([]float32, n))); m != got {
				t.Errorf("bits %d, n = %d: message of %d bytes, EncodedSize %d", bits, n, m, got)
			}
		}
	}
}

// TestQuantizerPacking checks the layout of the codes against a bit-by-bit
// packing (code i in bits i·Bits … of the little-endian bit stream), and
// that the codes decode back to values on the grid, for every width.
func TestQuantizerPacking(t *testing.T) {
	t.Parallel()
	for bits := 1; bits <= 16; bits++ {
		const s = 0x1p-4
		q := int(1) << bits
		qz := gossip.Quantizer{Bits: bits, Scale: s}
		rng := rand.New(rand.NewPCG(6, uint64(bits)))
		n := 37
		codes := make([]int, n)
		x := make([]float32, n)
		for i := range codes {
			codes[i] = rng.IntN(q)
			if i < 2 {
				codes[i] = i * (q - 1)
			}
			x[i] = float32(s * float64(codes[i]+q*(rng.IntN(5)-2))) // negative ones too
		}
		want := make([]byte, (n*bits+7)/8)
		for j := range n * bits {
			if codes[j/bits]>>(j%bits)&1 != 0 {
				want[j/8] |= 1 << (j % 8)
			}
		}
		msg := qz.Encode(x)
		if got := msg[:len(want)]; !bytes.Equal(got, want) {
			t.Errorf("bits %d: codes %v packed as %x, want %x", bits, codes, got, want)
		}
		out, violated := decode(t, qz, msg, x)
		if violated || !slicesEqual(out, x) {
			t.Errorf("bits %d: grid values %v decode to %v against themselves, violation %v", bits, x, out, violated)
		}
	}
	for _, c := range []struct {
		bits int
		x    []float32
		want []byte
	}{
		{4, []float32{-1, 0, 1, -8, 7}, []byte{0x0f, 0x81, 0x07}},
		{3, []float32{7, 1, 5}, []byte{0x4f, 0x01}},
		{16, []float32{-1, 258}, []byte{0xff, 0xff, 0x02, 0x01}},
		{1, []float32{1, 0, 0, 1, 1, 1, 0, 1, -1}, []byte{0xb9, 0x01}},
	} {
		qz := gossip.Quantizer{Bits: c.bits, Scale: 1}
		if got := qz.Encode(c.x); !bytes.Equal(got[:len(c.want)], c.want) {
			t.Errorf("bits %d: %v packed as %x, want %x", c.bits, c.x, got[:len(c.want)], c.want)
		}
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestQuantizerEdgeCases covers no coordinates, halves (to even, exactly
// s/2 away), negative values and a reference far from zero.
func TestQuantizerEdgeCases(t *testing.T) {
	t.Parallel()
	qz := gossip.Quantizer{Bits: 4, Scale: 0.25}
	msg := qz.Encode(nil)
	if len(msg) != 8 {
		t.Errorf("no coordinates: message of %d bytes, want 8", len(msg))
	}
	if violated, err := qz.Decode(msg, nil, nil); violated || err != nil {
		t.Errorf("no coordinates: violation %v, error %v", violated, err)
	}
	for _, c := range []struct {
		name   string
		x, ref []float32
		want   []float32
	}{
		{"halves", []float32{0.125, -0.125, 0.625, -0.625, 0.875, -0.875}, []float32{0, 0, 0, 0, 0, 0}, []float32{0, 0, 0.5, -0.5, 1, -1}},
		{"negative", []float32{-1.3, -0.1, -1.9}, []float32{-1, -0.5, -1}, []float32{-1.25, 0, -2}},
		{"far from zero", []float32{1000.1, -999.9}, []float32{1000.9, -1000.9}, []float32{1000, -1000}},
	} {
		out, violated := decode(t, qz, qz.Encode(c.x), c.ref)
		if violated || !slicesEqual(out, c.want) {
			t.Errorf("%s: %v against %v decodes to %v, violation %v; want %v", c.name, c.x, c.ref, out, violated, c.want)
		}
		for i := range out {
			if e := math.Abs(float64(out[i] - c.x[i])); e > qz.Scale/2 {
				t.Errorf("%s: x[%d] = %g decodes to %g, error %g > s/2", c.name, i, c.x[i], out[i], e)
			}
		}
	}
}

// TestQuantizerMalformed checks that Decode rejects messages of the wrong
// length or with stray padding bits, and panics on programmer errors.
func TestQuantizerMalformed(t *testing.T) {
	t.Parallel()
	qz := gossip.Quantizer{Bits: 3, Scale: 1}
	ref := make([]float32, 5) // 15 bits: 2 bytes, one spare bit
	msg := qz.Encode([]float32{1, 2, 3, 4, 5})
	for _, bad := range [][]byte{msg[:len(msg)-1], append(append([]byte(nil), msg...), 0), nil} {
		if _, err := qz.Decode(bad, ref, make([]float32, 5)); err == nil {
			t.Errorf("message of %d bytes for 5 coordinates accepted", len(bad))
		}
	}
	padded := append([]byte(nil), msg...)
	padded[1] |= 0x80
	if _, err := qz.Decode(padded, ref, make([]float32, 5)); err == nil {
		t.Error("message with a spare bit set accepted")
	}
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"bits 0", func() { gossip.Quantizer{Bits: 0, Scale: 1}.Encode(nil) }},
		{"bits 17", func() { gossip.Quantizer{Bits: 17, Scale: 1}.EncodedSize(1) }},
		{"scale 0", func() { gossip.Quantizer{Bits: 8}.Encode(nil) }},
		{"scale NaN", func() { gossip.Quantizer{Bits: 8, Scale: math.NaN()}.Radius() }},
		{"scale +Inf", func() { gossip.Quantizer{Bits: 8, Scale: math.Inf(1)}.Radius() }},
		{"output length", func() { _, _ = qz.Decode(msg, ref, make([]float32, 4)) }},
		{"ScaleFor bound 0", func() { gossip.ScaleFor(8, 0) }},
		{"ScaleFor bits 17", func() { gossip.ScaleFor(17, 1) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.f()
		}()
	}
}

// TestScaleFor checks that ScaleFor picks the finest power of two whose
// radius exceeds the bound, and that decoding at that distance is exact.
func TestScaleFor(t *testing.T) {
	t.Parallel()
	for bits := 1; bits <= 16; bits++ {
		half := float64(int(1)<<bits-1) / 2
		below := math.Nextafter(half*0x1p-5, 0)
		for _, bound := range []float64{1e-3, 0.1, 1, 3, half * 0x1p-5, below, 1e30} {
			s := gossip.ScaleFor(bits, bound)
			if !isPow2(s) || !(bound < half*s) || !(half*s/2 <= bound) {
				t.Errorf("bits %d, bound %g: scale %g, radius %g", bits, bound, s, half*s)
			}
		}
		qz := gossip.Quantizer{Bits: bits, Scale: gossip.ScaleFor(bits, 0.75)}
		x := []float32{0.3, -2.2, 7.125}
		ref := []float32{0.3 - 0.75, -2.2 + 0.75, 7.125 + 0.75}
		out, violated := decode(t, qz, qz.Encode(x), ref)
		for i := range x {
			if e := math.Abs(float64(out[i] - x[i])); violated || e > qz.Scale/2 {
				t.Errorf("bits %d, s = %g: x[%d] = %g decodes to %g from 0.75 away, violation %v", bits, qz.Scale, i, x[i], out[i], violated)
			}
		}
	}
}

// FuzzQuantizerDecode feeds arbitrary messages to Decode: nothing may
// panic, a message is rejected exactly when its length or spare bits are
// wrong, and an accepted one decodes to grid points in the residue
// classes of its codes, nearest the reference, which re-encode to the
// same codes and, under their own checksum, decode without a violation.
func FuzzQuantizerDecode(f *testing.F) {
	qz := gossip.Quantizer{Bits: 5, Scale: 0x1p-6, Key: 9}
	f.Add(qz.Encode([]float32{0.1, -0.2, 0.3, 1}), uint8(4), uint64(9))
	f.Add(qz.Encode(nil), uint8(0), uint64(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, uint8(15), uint64(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, uint8(2), uint64(3))
	f.Fuzz(func(t *testing.T, msg []byte, bits uint8, key uint64) {
		qz := gossip.Quantizer{Bits: 1 + int(bits%16), Scale: 0x1p-6, Key: key}
		n := max(len(msg)-8, 0) * 8 / qz.Bits
		rng := rand.New(rand.NewPCG(key, uint64(n)))
		ref := make([]float32, n)
		for i := range ref {
			ref[i] = float32(rng.NormFloat64() * 100)
		}
		out := make([]float32, n)
		_, err := qz.Decode(msg, ref, out)
		codeBytes := len(msg) - 8
		ok := len(msg) == qz.EncodedSize(n) && (n*qz.Bits%8 == 0 || msg[codeBytes-1]>>(n*qz.Bits%8) == 0)
		if (err == nil) != ok {
			t.Fatalf("%d bytes, %d coordinates of %d bits: error %v", len(msg), n, qz.Bits, err)
		}
		if err != nil {
			return
		}
		half := float64(int(1)<<qz.Bits) / 2
		for i := range out {
			if v, k := float64(ref[i])/qz.Scale, float64(out[i])/qz.Scale; !(k-half <= v && v < k+half) || k != math.Trunc(k) {
				t.Fatalf("coordinate %d: decoded grid point %g, reference at %g", i, k, v)
			}
		}
		again := qz.Encode(out)
		if !bytes.Equal(again[:codeBytes], msg[:codeBytes]) {
			t.Fatalf("decoded values re-encode to %x, from %x", again[:codeBytes], msg[:codeBytes])
		}
		out2 := make([]float32, n)
		if violated, err := qz.Decode(again, ref, out2); err != nil || violated || !slicesEqual(out, out2) {
			t.Fatalf("re-encoded message: violation %v, error %v", violated, err)
		}
	})
}

// A pair of workers exchanges a model at 8 bits a coordinate, each
// decoding against its own copy; the checksum reports when the copies
// were too far apart for the codes.
func ExampleQuantizer() {
	qz := gossip.Quantizer{Bits: 8, Scale: gossip.ScaleFor(8, 0.05), Key: 2021}
	fmt.Printf("s = 2^%g, radius %.4f, %d bytes for 4 coordinates (16 at full precision)\n",
		math.Log2(qz.Scale), qz.Radius(), qz.EncodedSize(4))

	x := []float32{0.5, -1.25, 3.14159, 0.001} // the sender's model
	ref := []float32{0.47, -1.22, 3.1, 0.04}   // the receiver's
	msg := qz.Encode(x)
	out := make([]float32, len(x))
	violated, err := qz.Decode(msg, ref, out)
	fmt.Printf("%.5f violated %v, error %v\n", out, violated, err)

	ref[2] = 3.3 // 0.16 away: beyond the radius
	violated, _ = qz.Decode(msg, ref, out)
	fmt.Printf("%.5f violated %v\n", out, violated)
	// Output:
	// s = 2^-11, radius 0.0623, 12 bytes for 4 coordinates (16 at full precision)
	// [0.50000 -1.25000 3.14160 0.00098] violated false, error <nil>
	// [0.50000 -1.25000 3.26660 0.00098] violated true
}
