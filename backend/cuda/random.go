package cuda

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

// Random implements backend.Backend with the Philox4x32-10 stream layout of
// the CPU backend (see backend/cpu/random.go): uniform draws are equal bit
// for bit, normal ones up to the last ulp of float64 log, sin and cos.
func (b *Backend) Random(dst backend.View, p backend.RandomParams) error {
	if err := b.checkView("random", "dst", dst); err != nil {
		return err
	}
	if !dst.IsContiguous() {
		return fmt.Errorf("cuda: random: dst (shape %v, strides %v) is not contiguous", dst.Shape, dst.Strides)
	}
	if p.Kind != backend.Uniform && p.Kind != backend.Normal {
		return fmt.Errorf("cuda: random: unknown distribution %d", p.Kind)
	}
	var top float64
	switch dst.DType {
	case backend.Float32:
		top = float64(math.Nextafter32(float32(p.B), float32(math.Inf(-1))))
	case backend.Float64:
		top = math.Nextafter(p.B, math.Inf(-1))
	default:
		return fmt.Errorf("cuda: random: dtype %v", dst.DType)
	}
	n := dst.NumElements()
	a := new(Args)
	a.Ptr(b.ptr(dst)).I64(int64(n)).Int(int(p.Kind)).F64(p.A).F64(p.B).F64(top).U64(p.Seed).U64(p.Offset)
	return b.launchN("random", "random_"+typeTag(dst.DType), n, a)
}

// Dropout implements backend.Backend: element i is dropped iff the float32
// uniform of stream position offset+i is below prob, as on the CPU. dst may
// be x itself.
func (b *Backend) Dropout(dst, mask, x backend.View, prob float64, seed, offset uint64) error {
	const k = "dropout"
	if err := b.checkSame(k, dst, []string{"mask", "x"}, mask, x); err != nil {
		return err
	}
	for _, v := range []backend.View{dst, mask, x} {
		if !v.IsContiguous() {
			return fmt.Errorf("cuda: %s: operand of shape %v has strides %v, want contiguous", k, v.Shape, v.Strides)
		}
	}
	if !(prob >= 0 && prob <= 1) {
		return fmt.Errorf("cuda: %s: probability %v outside [0, 1]", k, prob)
	}
	if mask.DType != backend.Bool || dst.DType != x.DType {
		return fmt.Errorf("cuda: %s: dtypes dst %v, mask %v, x %v", k, dst.DType, mask.DType, x.DType)
	}
	if err := floatType(k, x.DType); err != nil {
		return err
	}
	n := x.NumElements()
	a := new(Args)
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(mask)).Ptr(b.ptr(x)).I64(int64(n)).F64(prob).F64(1 / (1 - prob)).U64(seed).U64(offset)
	return b.launchN("random", "dropout_"+typeTag(x.DType), n, a)
}
