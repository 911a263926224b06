package cuda

import (
	"math"
	"testing"
)

// halfValue decodes an IEEE binary16 bit pattern exactly.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+m/1024, e-15)
}

// TestFloat32ToHalf checks every finite half: its own value converts back
// to it, and the midpoint to the next half rounds to the even one of the
// two (what fill_f16 stores and what cvt.rn.f16.f32 computes on the GPU).
func TestFloat32ToHalf(t *testing.T) {
	t.Parallel()
	for h := 0; h < 0x10000; h++ {
		v := halfValue(uint16(h))
		if math.IsNaN(v) {
			if got := float32ToHalf(float32(v)); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Errorf("NaN → %#04x", got)
			}
			continue
		}
		if got := float32ToHalf(float32(v)); got != uint16(h) && !(v == 0 && got&0x7fff == 0) {
			t.Fatalf("%v (%#04x) → %#04x", v, h, got)
		}
		if h&0x7fff >= 0x7bff { // the largest finite half and above
			continue
		}
		next := halfValue(uint16(h + 1))
		mid := (v + next) / 2
		if float64(float32(mid)) != mid {
			continue
		}
		want := uint16(h)
		if h&1 == 1 {
			want = uint16(h + 1)
		}
		if got := float32ToHalf(float32(mid)); got != want {
			t.Errorf("midpoint %v of %#04x and %#04x → %#04x, want %#04x", mid, h, h+1, got, want)
		}
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{{65504, 0x7bff}, {65519, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {-1e10, 0xfc00}, {float32(math.Ldexp(1, -25)), 0}, {float32(math.Ldexp(3, -26)), 1}} {
		if got := float32ToHalf(c.f); got != c.want {
			t.Errorf("%v → %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

func TestFloat32ToBFloat16(t *testing.T) {
	t.Parallel()
	cases := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81},
		{math.MaxFloat32, 0x7f80},
	}
	for _, c := range cases {
		if got := float32ToBFloat16(c.f); got != c.want {
			t.Errorf("%v → %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if got := float32ToBFloat16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN → %#04x", got)
	}
}

func TestFillBits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dt   string
		v    float64
		want uint64
	}{
		{"float32", 1.5, uint64(math.Float32bits(1.5))},
		{"float64", -0.25, math.Float64bits(-0.25)},
		{"float16", 1, 0x3c00},
		{"bfloat16", 1, 0x3f80},
		{"int32", -3.9, uint64(uint32(0xfffffffd))},
		{"int64", -3.9, uint64(0xfffffffffffffffd)},
		{"uint8", 200.7, 200},
		{"bool", 0.1, 1},
		{"bool", 0, 0},
	}
	for _, c := range cases {
		dt := dtypeNamed(t, c.dt)
		got, err := fillBits(dt, c.v)
		if err != nil || got != c.want {
			t.Errorf("fillBits(%v, %v) = %#x, %v; want %#x", c.dt, c.v, got, err, c.want)
		}
	}
}
