package cpu

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/internal/philox"
)

// Random numbers come from Philox4x32-10 (Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011), a counter-based
// generator: a bijection of a 128-bit counter under a 64-bit key, so any
// element of the stream can be computed on its own.
//
// The stream of a seed s is laid out as follows (philox.Block computes a
// block). The key is
// (uint32(s), uint32(s>>32)). Stream position j (element i of a call has
// j = Offset+i) belongs to block b = j/4 and lane j%4. Block b is the
// Philox output W = (w0, w1, w2, w3) of the counter (uint32(b), uint32(b>>32), 0, 0);
// float64 draws also use V, the output of (uint32(b), uint32(b>>32), 1, 0).
//
//   - A float32 uniform is u = (w_lane >> 8)·2⁻²⁴ ∈ [0, 1).
//   - A float64 uniform is u = ((w_lane >> 5)·2²⁶ + (v_lane >> 6))·2⁻⁵³ ∈ [0, 1);
//     its first 24 bits are those of the float32 uniform.
//   - Uniform(A, B) is A + (B−A)·u, computed in float64 and rounded to dst's dtype.
//   - Normal(A, B) is A + B·z with z from the Box–Muller transform of the
//     uniforms u1, u2 of lanes 0 and 1 (or 2 and 3) of the block, at dst's
//     precision: r = √(−2·ln(1−u1)), z = r·cos(2π·u2) for the even lane and
//     r·sin(2π·u2) for the odd lane.
//   - Dropout drops element i iff the float32 uniform of position j
//     satisfies u < prob, whatever the dtype of x.
//
// Normal pairs the lanes of a block, so draws meant to be independent
// should start at multiples of 4 (tensor.Generator reserves its ranges so).

// stream computes the draws of one seed.
type stream struct {
	key  [2]uint32
	wide bool // float64 draws: compute V as well as W
	w, v [4]uint32
}

func newStream(seed uint64, wide bool) stream {
	return stream{key: [2]uint32{uint32(seed), uint32(seed >> 32)}, wide: wide}
}

// load computes block b.
func (s *stream) load(b uint64) {
	ctr := [4]uint32{uint32(b), uint32(b >> 32), 0, 0}
	s.w = philox.Block(ctr, s.key)
	if s.wide {
		ctr[2] = 1
		s.v = philox.Block(ctr, s.key)
	}
}

// u24 is the float32 uniform of a lane of the loaded block.
func (s *stream) u24(lane int) float64 { return float64(s.w[lane]>>8) * 0x1p-24 }

// u53 is the float64 uniform of a lane of the loaded block.
func (s *stream) u53(lane int) float64 {
	return float64(uint64(s.w[lane]>>5)<<26|uint64(s.v[lane]>>6)) * 0x1p-53
}

func (s *stream) uniform(lane int) float64 {
	if s.wide {
		return s.u53(lane)
	}
	return s.u24(lane)
}

// normals returns the four standard normal draws of the loaded block, by
// the Box–Muller transform of lanes (0, 1) and (2, 3).
func (s *stream) normals() (z [4]float64) {
	for l := 0; l < 4; l += 2 {
		u1, u2 := s.uniform(l), s.uniform(l+1)
		r := math.Sqrt(-2 * math.Log(1-u1))
		sin, cos := math.Sincos(2 * math.Pi * u2)
		z[l], z[l+1] = r*cos, r*sin
	}
	return z
}

// below returns the largest T less than T(b).
func below[T float](b float64) T {
	var z T
	if _, ok := any(z).(float32); ok {
		return T(math.Nextafter32(float32(b), float32(math.Inf(-1))))
	}
	return T(math.Nextafter(b, math.Inf(-1)))
}

// blocks calls fn for each Philox block that stream positions
// [offset+lo, offset+hi) touch, with the block's range of output indices
// [i0, i1) and the lane of i0.
func blocks(offset uint64, lo, hi int, fn func(b uint64, i0, i1, lane int)) {
	for i := lo; i < hi; {
		j := offset + uint64(i)
		lane := int(j & 3)
		n := min(4-lane, hi-i)
		fn(j>>2, i, i+n, lane)
		i += n
	}
}

func fillRandom[T float](d []T, p backend.RandomParams, wide bool) {
	top := below[T](p.B)
	parallelFor(len(d), grainElems/16, func(lo, hi int) {
		s := newStream(p.Seed, wide)
		blocks(p.Offset, lo, hi, func(b uint64, i0, i1, lane int) {
			s.load(b)
			switch p.Kind {
			case backend.Uniform:
				for i := i0; i < i1; i++ {
					x := T(p.A + (p.B-p.A)*s.uniform(lane+i-i0))
					if p.B > p.A && x >= T(p.B) {
						x = top
					}
					d[i] = x
				}
			case backend.Normal:
				z := s.normals()
				for i := i0; i < i1; i++ {
					d[i] = T(p.A + p.B*z[lane+i-i0])
				}
			}
		})
	})
}

// Random implements backend.Backend; the layout of the stream is described
// above.
func (c *Backend) Random(dst backend.View, p backend.RandomParams) error {
	if err := checkHostView("random", "dst", dst); err != nil {
		return err
	}
	if !dst.IsContiguous() {
		return fmt.Errorf("cpu: random: dst (shape %v, strides %v) is not contiguous", dst.Shape, dst.Strides)
	}
	if p.Kind != backend.Uniform && p.Kind != backend.Normal {
		return fmt.Errorf("cpu: random: unknown distribution %d", p.Kind)
	}
	n := dst.NumElements()
	switch dst.DType {
	case backend.Float32:
		fillRandom(F32(dst)[dst.Offset:dst.Offset+n], p, false)
	case backend.Float64:
		fillRandom(F64(dst)[dst.Offset:dst.Offset+n], p, true)
	default:
		return fmt.Errorf("cpu: random: dtype %v", dst.DType)
	}
	return nil
}
