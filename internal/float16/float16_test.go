package float16

import (
	"math"
	"math/rand/v2"
	"testing"
)

// f16Value decodes a binary16 by its definition.
func f16Value(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	switch e {
	case 0:
		return s * math.Ldexp(m, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return s * math.Inf(1)
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

func TestF16Decode(t *testing.T) {
	t.Parallel()
	for h := 0; h < 1<<16; h++ {
		got, want := float64(ToFloat32(uint16(h))), f16Value(uint16(h))
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("ToFloat32(%#04x) = %v, want %v", h, got, want)
		}
		if math.Signbit(got) != (h&0x8000 != 0) && !math.IsNaN(want) {
			t.Fatalf("ToFloat32(%#04x) = %v: wrong sign", h, got)
		}
	}
}

// TestF16Rounding checks every pair of adjacent float16 values: each value
// maps to itself, the midpoint goes to the one with an even significand,
// and one float32 ulp either side of it goes to the nearer one.
func TestF16Rounding(t *testing.T) {
	t.Parallel()
	for h := uint16(0); h < 0x7c00; h++ {
		for _, sign := range []uint16{0, 0x8000} {
			lo, hi := h|sign, (h+1)|sign
			a, b := ToFloat32(lo), ToFloat32(hi)
			if got := FromFloat32(a); got != lo {
				t.Fatalf("FromFloat32(%v) = %#04x, want %#04x", a, got, lo)
			}
			if h == 0x7bff { // the next value up is Inf; see the table below
				continue
			}
			mid := float32((float64(a) + float64(b)) / 2)
			even := lo
			if h&1 == 1 {
				even = hi
			}
			if got := FromFloat32(mid); got != even {
				t.Fatalf("FromFloat32(midpoint %v of %#04x, %#04x) = %#04x, want %#04x", mid, lo, hi, got, even)
			}
			toward := float32(math.Inf(1))
			if sign != 0 {
				toward = -toward
			}
			if got := FromFloat32(math.Nextafter32(mid, -toward)); got != lo {
				t.Fatalf("FromFloat32(just inside %v) = %#04x, want %#04x", mid, got, lo)
			}
			if got := FromFloat32(math.Nextafter32(mid, toward)); got != hi {
				t.Fatalf("FromFloat32(just beyond %v) = %#04x, want %#04x", mid, got, hi)
			}
		}
	}
	for _, c := range []struct {
		x    float32
		want uint16
	}{
		{65519.99, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {-1e10, 0xfc00},
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{math.SmallestNonzeroFloat32, 0}, {float32(math.Ldexp(1, -25)), 0}, {float32(math.Ldexp(1.5, -25)), 1},
	} {
		if got := FromFloat32(c.x); got != c.want {
			t.Errorf("FromFloat32(%v) = %#04x, want %#04x", c.x, got, c.want)
		}
	}
	if h := FromFloat32(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("FromFloat32(NaN) = %#04x, not a NaN", h)
	}
}

func TestBF16Rounding(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 18 {
		f := math.Float32frombits(r.Uint32())
		got := BFloat16ToFloat32(BFloat16FromFloat32(f))
		if f != f {
			if got == got {
				t.Fatalf("bf16 of NaN %#08x is %v", math.Float32bits(f), got)
			}
			continue
		}
		// The result is one of the two bfloat16 neighbours of f, the nearer
		// one, and the even one on a tie.
		down := math.Float32frombits(math.Float32bits(f) &^ 0xffff)
		up := math.Float32frombits(math.Float32bits(down) + 0x10000)
		upv := float64(up)
		if math.IsInf(upv, 0) { // overflow: Inf stands where 2¹²⁸ would be
			upv = math.Copysign(math.Ldexp(1, 128), upv)
		}
		dd, du := math.Abs(float64(f)-float64(down)), math.Abs(upv-float64(f))
		want := down
		if du < dd || (du == dd && math.Float32bits(down)&0x10000 != 0) {
			want = up
		}
		if math.IsInf(float64(down), 0) {
			want = down
		}
		if got != want {
			t.Fatalf("bf16(%v) = %v, want %v", f, got, want)
		}
	}
}

func TestBFloat16Values(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81},
		{math.MaxFloat32, 0x7f80},
		{float32(math.Inf(-1)), 0xff80},
	} {
		if got := BFloat16FromFloat32(c.f); got != c.want {
			t.Errorf("BFloat16FromFloat32(%v) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if got := BFloat16FromFloat32(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("BFloat16FromFloat32(NaN) = %#04x, not a NaN", got)
	}
}
