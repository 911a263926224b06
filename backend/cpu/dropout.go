package cpu

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

func dropout[T float](d []T, mask []uint8, x []T, prob float64, seed, offset uint64) {
	scale := T(1 / (1 - prob))
	parallelFor(len(d), grainElems/16, func(lo, hi int) {
		s := newStream(seed, false)
		blocks(offset, lo, hi, func(b uint64, i0, i1, lane int) {
			s.load(b)
			for i := i0; i < i1; i++ {
				if s.u24(lane+i-i0) < prob {
					mask[i] = 0
					d[i] = 0
				} else {
					mask[i] = 1
					d[i] = x[i] * scale
				}
			}
		})
	})
}

// Dropout implements backend.Backend. The draws are the float32 uniforms of
// the Philox stream described with Random, so a mask depends only on (seed,
// offset, prob), not on x's dtype. With prob = 1 every element is dropped
// and dst is all zeros. dst may be x itself.
func (c *Backend) Dropout(dst, mask, x backend.View, prob float64, seed, offset uint64) error {
	if err := checkOperands("dropout", dst, []string{"mask", "x"}, mask, x); err != nil {
		return err
	}
	for _, v := range []backend.View{dst, mask, x} {
		if !v.IsContiguous() {
			return fmt.Errorf("cpu: dropout: operand of shape %v has strides %v, want contiguous", v.Shape, v.Strides)
		}
	}
	if !(prob >= 0 && prob <= 1) {
		return fmt.Errorf("cpu: dropout: probability %v outside [0, 1]", prob)
	}
	if mask.DType != backend.Bool || dst.DType != x.DType {
		return fmt.Errorf("cpu: dropout: dtypes dst %v, mask %v, x %v", dst.DType, mask.DType, x.DType)
	}
	n := x.NumElements()
	m := U8(mask)[mask.Offset : mask.Offset+n]
	switch x.DType {
	case backend.Float32:
		dropout(F32(dst)[dst.Offset:dst.Offset+n], m, F32(x)[x.Offset:x.Offset+n], prob, seed, offset)
	case backend.Float64:
		dropout(F64(dst)[dst.Offset:dst.Offset+n], m, F64(x)[x.Offset:x.Offset+n], prob, seed, offset)
	default:
		return fmt.Errorf("cpu: dropout: dtype %v", x.DType)
	}
	return nil
}
