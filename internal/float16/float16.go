// Package float16 converts between float32 and the two 16-bit floating-point
// formats: IEEE 754 binary16 (float16, "half") and bfloat16 (the top half of
// a float32). Narrowing rounds to nearest, ties to even, as PyTorch's
// c10::Half and c10::BFloat16 constructors and CUDA's cvt.rn do; widening is
// exact. float64 values go through float32 first, as those constructors do.
// The CPU and CUDA backends, the data loader's bfloat16 normalization and
// the .npy reader share these.
package float16

import "math"

// FromFloat32 returns the IEEE 754 binary16 nearest to f (ties to even).
// Values of magnitude 65520 and above become ±Inf; NaNs stay quiet NaNs
// and keep the top bits of their payload.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	switch {
	case exp == 0xff:
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	case exp == 0:
		// float32 subnormals are far below half the smallest float16.
		return sign
	}
	e := exp - 127 + 15
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 {
		// A float16 subnormal counts units of 2⁻²⁴; the 24-bit significand m
		// is worth m·2^(exp−150), that is m >> (126−exp) units.
		m := man | 0x800000
		shift := uint(126 - exp)
		if shift >= 32 {
			return sign
		}
		q := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && q&1 == 1) {
			q++
		}
		return sign | uint16(q)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry out of the significand bumps the exponent, up to Inf
	}
	return sign | uint16(h)
}

// ToFloat32 widens a binary16 exactly.
func ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0:
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// BFloat16FromFloat32 keeps the top 16 bits of f, rounded to nearest even;
// a NaN stays a quiet NaN.
func BFloat16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BFloat16ToFloat32 widens a bfloat16 exactly.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
