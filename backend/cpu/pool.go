package cpu

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/flockml/flock/backend"
)

// poolShape is a validated 2-D pooling.
type poolShape struct{ backend.Pool2dGeometry }

func poolGeometry(kernel string, op backend.PoolOp, x, y, indices backend.View, p backend.PoolParams) (poolShape, error) {
	g, err := backend.CheckPool2d(op, x, y, indices, p)
	if err != nil {
		return poolShape{}, fmt.Errorf("cpu: %s: %w", kernel, err)
	}
	for i, v := range []backend.View{x, y, indices} {
		if !v.IsZero() && (!v.IsContiguous() || !fits(v)) {
			return poolShape{}, fmt.Errorf("cpu: %s: x%v, y%v, %+v: operand %d is not a contiguous view inside its buffer", kernel, x.Shape, y.Shape, p, i)
		}
	}
	return poolShape{g}, nil
}

// Pool2d implements backend.Backend. Max pooling follows PyTorch exactly:
// padding never wins, ties keep the first position in row-major order, and
// a NaN wins (the last one, when there are several). Average pooling divides the window's sum by
// the size of the window clipped to the padded input (CountIncludePad) or to
// the input itself, as avg_pool2d does; a window that ceil mode places
// entirely in the right or bottom padding averages to 0.
func (c *Backend) Pool2d(op backend.PoolOp, dst, indices, x backend.View, p backend.PoolParams) error {
	s, err := poolGeometry("pool2d", op, x, dst, indices, p)
	if err != nil {
		return err
	}
	var idx []int64
	if op == backend.MaxPool {
		idx = I64(indices)[indices.Offset:]
	}
	switch x.DType {
	case backend.Float32:
		poolForward(&s, op, F32(x)[x.Offset:], F32(dst)[dst.Offset:], idx)
	case backend.Float64:
		poolForward(&s, op, F64(x)[x.Offset:], F64(dst)[dst.Offset:], idx)
	}
	return nil
}

// Pool2dBackward implements backend.Backend. For MaxPool each dy goes to
// the position its index names; for AvgPool it is spread evenly (by the
// forward divisor) over its window.
func (c *Backend) Pool2dBackward(op backend.PoolOp, dx, dy, indices backend.View, p backend.PoolParams) error {
	s, err := poolGeometry("pool2d backward", op, dx, dy, indices, p)
	if err != nil {
		return err
	}
	var idx []int64
	if op == backend.MaxPool {
		idx = I64(indices)[indices.Offset:]
	}
	var bad atomic.Int64
	bad.Store(-1)
	switch dx.DType {
	case backend.Float32:
		poolBackward(&s, op, F32(dx)[dx.Offset:], F32(dy)[dy.Offset:], idx, &bad)
	case backend.Float64:
		poolBackward(&s, op, F64(dx)[dx.Offset:], F64(dy)[dy.Offset:], idx, &bad)
	}
	if i := bad.Load(); i >= 0 {
		return fmt.Errorf("cpu: pool2d backward: index %d outside a %d×%d plane", i, s.H, s.W)
	}
	return nil
}

// avgWindow returns the input rows [h0, h1) (and likewise columns) of output
// (oh, ow) for average pooling, clipped to the input, and the divisor.
func (s *poolShape) avgWindow(oh, ow int) (h0, h1, w0, w1, div int) {
	h0, w0 = oh*s.SH-s.PH, ow*s.SW-s.PW
	h1, w1 = min(h0+s.KH, s.H+s.PH), min(w0+s.KW, s.W+s.PW)
	div = (h1 - h0) * (w1 - w0)
	h0, w0 = max(h0, 0), max(w0, 0)
	h1, w1 = min(h1, s.H), min(w1, s.W)
	if !s.IncludePad {
		div = (h1 - h0) * (w1 - w0)
	}
	return h0, h1, w0, w1, div
}

// maxWindow returns the first row and column of output (oh, ow)'s window
// inside the input and the ends of its ranges (step dh and dw).
func (s *poolShape) maxWindow(oh, ow int) (h0, h1, w0, w1 int) {
	h0, w0 = oh*s.SH-s.PH, ow*s.SW-s.PW
	h1 = min(h0+(s.KH-1)*s.DH+1, s.H)
	w1 = min(w0+(s.KW-1)*s.DW+1, s.W)
	for h0 < 0 {
		h0 += s.DH
	}
	for w0 < 0 {
		w0 += s.DW
	}
	return h0, h1, w0, w1
}

// isMax2x2 reports whether s is max pooling's most common form: 2×2
// windows, stride 2, no padding or dilation.
func (s *poolShape) isMax2x2() bool {
	return s.KH == 2 && s.KW == 2 && s.SH == 2 && s.SW == 2 && s.PH == 0 && s.PW == 0 &&
		s.DH == 1 && s.DW == 1 && 2*s.OH <= s.H && 2*s.OW <= s.W
}

// maxPool2x2 is max pooling of one plane in 2×2 windows of stride 2, with
// the general loop's rules (first maximum in row-major order, NaN wins).
func maxPool2x2[T float32 | float64](in, out []T, idx []int64, w, oh, ow int) {
	for i := range oh {
		base := 2 * i * w
		r0, r1 := in[base:base+2*ow], in[base+w:base+w+2*ow]
		o, ix := out[i*ow:(i+1)*ow], idx[i*ow:(i+1)*ow]
		for j := range o {
			best, at := r0[2*j], base+2*j
			if v := r0[2*j+1]; v > best || v != v {
				best, at = v, base+2*j+1
			}
			if v := r1[2*j]; v > best || v != v {
				best, at = v, base+w+2*j
			}
			if v := r1[2*j+1]; v > best || v != v {
				best, at = v, base+w+2*j+1
			}
			o[j], ix[j] = best, int64(at)
		}
	}
}

// maxOne returns the maximum of output (oh, ow)'s window and its position
// in the plane: the first maximum in row-major order, or the last NaN.
func maxOne[T float32 | float64](s *poolShape, in []T, oh, ow int) (T, int) {
	h0, h1, w0, w1 := s.maxWindow(oh, ow)
	best, at := T(math.Inf(-1)), h0*s.W+w0
	for ih := h0; ih < h1; ih += s.DH {
		for iw := w0; iw < w1; iw += s.DW {
			v := in[ih*s.W+iw]
			if v > best || v != v {
				best, at = v, ih*s.W+iw
			}
		}
	}
	return best, at
}

// maxPoolPlane max-pools one plane.
func maxPoolPlane[T float32 | float64](s *poolShape, in, out []T, idx []int64) {
	if in32, ok := any(in).([]float32); ok && maxPoolVec(s, len(in)) {
		maxPoolPlaneVec(s, in32, any(out).([]float32), idx)
		return
	}
	if s.isMax2x2() {
		maxPool2x2(in, out, idx, s.W, s.OH, s.OW)
		return
	}
	for oh := range s.OH {
		for ow := range s.OW {
			b, at := maxOne(s, in, oh, ow)
			out[oh*s.OW+ow], idx[oh*s.OW+ow] = b, int64(at)
		}
	}
}

// maxPoolPlaneVec max-pools one plane with the vector loop where windows
// lie inside the plane and maxOne at its borders.
func maxPoolPlaneVec(s *poolShape, in, out []float32, idx []int64) {
	// The windows of row oh lie inside when ih0 = oh·sh − ph ≥ 0 and
	// ih0 + (kh−1)·dh < h, that is for oh in [ohLo, ohHi); those of column
	// ow when 2·ow − pw ≥ 0 and 2·ow − pw + (kw−1)·dw < w, for ow in
	// [owLo, owHi).
	ohLo := min((s.PH+s.SH-1)/s.SH, s.OH)
	ohHi := ohLo
	if num := s.H - 1 + s.PH - (s.KH-1)*s.DH; num >= 0 {
		ohHi = max(ohLo, min(s.OH, num/s.SH+1))
	}
	owLo := min((s.PW+1)/2, s.OW)
	owHi := owLo
	if num := s.W - 1 + s.PW - (s.KW-1)*s.DW; num >= 0 {
		owHi = max(owLo, min(s.OW, num/2+1))
	}
	if owLo == owHi {
		ohHi = ohLo
	}
	maxPoolBlock(s, in, out, idx, ohLo, ohHi, owLo, owHi)
	for oh := range s.OH {
		inner := oh >= ohLo && oh < ohHi
		for ow := range s.OW {
			if inner && ow >= owLo && ow < owHi {
				continue
			}
			b, at := maxOne(s, in, oh, ow)
			out[oh*s.OW+ow], idx[oh*s.OW+ow] = b, int64(at)
		}
	}
}

func poolForward[T float32 | float64](s *poolShape, op backend.PoolOp, x, y []T, idx []int64) {
	HW, OHW := s.H*s.W, s.OH*s.OW
	work := OHW * s.KH * s.KW
	parallelFor(s.Planes, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			in, out := x[pl*HW:(pl+1)*HW], y[pl*OHW:(pl+1)*OHW]
			if op == backend.MaxPool {
				maxPoolPlane(s, in, out, idx[pl*OHW:(pl+1)*OHW])
				continue
			}
			for oh := range s.OH {
				for ow := range s.OW {
					o := oh*s.OW + ow
					h0, h1, w0, w1, div := s.avgWindow(oh, ow)
					if h0 >= h1 || w0 >= w1 {
						out[o] = 0
						continue
					}
					var sum T
					for ih := h0; ih < h1; ih++ {
						for _, v := range in[ih*s.W+w0 : ih*s.W+w1] {
							sum += v
						}
					}
					out[o] = sum / T(div)
				}
			}
		}
	})
}

func poolBackward[T float32 | float64](s *poolShape, op backend.PoolOp, dx, dy []T, idx []int64, bad *atomic.Int64) {
	HW, OHW := s.H*s.W, s.OH*s.OW
	work := OHW
	if op == backend.AvgPool {
		work *= s.KH * s.KW
	}
	parallelFor(s.Planes, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			in, out := dx[pl*HW:(pl+1)*HW], dy[pl*OHW:(pl+1)*OHW]
			clear(in)
			if op == backend.MaxPool {
				for o, i := range idx[pl*OHW : (pl+1)*OHW] {
					if i < 0 || i >= int64(HW) {
						bad.Store(i)
						continue
					}
					in[i] += out[o]
				}
				continue
			}
			for oh := range s.OH {
				for ow := range s.OW {
					h0, h1, w0, w1, div := s.avgWindow(oh, ow)
					g := out[oh*s.OW+ow] / T(div)
					for ih := h0; ih < h1; ih++ {
						row := in[ih*s.W+w0 : ih*s.W+max(w0, w1)]
						for i := range row {
							row[i] += g
						}
					}
				}
			}
		}
	})
}
