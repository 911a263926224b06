package backendtest

import "math"

// Reference float16/bfloat16 conversions (round to nearest even), written
// independently of any backend's.

func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func f16ToF32(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * float32(math.Ldexp(m, -24))
	case 31:
		if m != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32(math.Ldexp(1+m/1024, e-15))
}

func f32ToF16(f float32) uint16 {
	x := float64(f)
	var sign uint16
	if math.Signbit(x) {
		sign = 0x8000
		x = -x
	}
	switch {
	case math.IsNaN(x):
		return 0x7e00
	case x >= 65520: // rounds to infinity
		return sign | 0x7c00
	case x < math.Ldexp(1, -14): // subnormal: units of 2^-24
		return sign | uint16(math.RoundToEven(x*(1<<24)))
	}
	e := math.Ilogb(x)
	m := math.RoundToEven((x/math.Ldexp(1, e) - 1) * 1024)
	if m == 1024 {
		m = 0
		e++
	}
	return sign | uint16(e+15)<<10 | uint16(m)
}
