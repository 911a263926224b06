package cpu

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/flockml/flock/backend"
)

// poolShape is a validated 2-D pooling.
type poolShape struct {
	planes         int // N·C
	h, w, oh, ow   int
	kh, kw, sh, sw int
	ph, pw, dh, dw int
	includePad     bool
}

func poolGeometry(kernel string, op backend.PoolOp, x, y, indices backend.View, p backend.PoolParams) (poolShape, error) {
	var s poolShape
	fail := func(format string, args ...any) (poolShape, error) {
		return s, fmt.Errorf("cpu: %s: x%v, y%v, %+v: %s", kernel, x.Shape, y.Shape, p, fmt.Sprintf(format, args...))
	}
	dt := x.DType
	if dt != backend.Float32 && dt != backend.Float64 {
		return fail("dtype %v, want float32 or float64", dt)
	}
	if y.DType != dt {
		return fail("dtypes %v and %v differ", x.DType, y.DType)
	}
	if len(x.Shape) != 4 || len(y.Shape) != 4 {
		return fail("operands must be 4-D")
	}
	switch op {
	case backend.MaxPool:
		if indices.IsZero() || indices.DType != backend.Int64 || !indices.Shape.Equal(y.Shape) {
			return fail("max pooling needs int64 indices of the output's shape")
		}
	case backend.AvgPool:
		if !indices.IsZero() {
			return fail("average pooling takes no indices")
		}
		if p.DilationH != 1 || p.DilationW != 1 {
			return fail("average pooling has no dilation (set it to 1)")
		}
	default:
		return fail("unknown pooling op %d", op)
	}
	views := []backend.View{x, y}
	if !indices.IsZero() {
		views = append(views, indices)
	}
	for i, v := range views {
		if !v.IsContiguous() || !fits(v) {
			return fail("operand %d is not a contiguous view inside its buffer", i)
		}
	}
	if p.KernelH < 1 || p.KernelW < 1 || p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 {
		return fail("kernel, stride and dilation must be ≥ 1")
	}
	if p.PadH < 0 || p.PadW < 0 || p.PadH > p.KernelH/2 || p.PadW > p.KernelW/2 {
		return fail("padding must be between 0 and half the kernel")
	}
	s = poolShape{
		planes: x.Shape[0] * x.Shape[1], h: x.Shape[2], w: x.Shape[3],
		kh: p.KernelH, kw: p.KernelW, sh: p.StrideH, sw: p.StrideW,
		ph: p.PadH, pw: p.PadW, dh: p.DilationH, dw: p.DilationW,
		includePad: p.CountIncludePad,
	}
	s.oh, s.ow = p.OutputSize(s.h, s.w)
	if s.oh < 1 || s.ow < 1 || s.h+2*s.ph < s.dh*(s.kh-1)+1 || s.w+2*s.pw < s.dw*(s.kw-1)+1 {
		return fail("the window does not fit the padded input")
	}
	if want := (backend.Shape{x.Shape[0], x.Shape[1], s.oh, s.ow}); !y.Shape.Equal(want) {
		return fail("output shape must be %v", want)
	}
	return s, nil
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
		return fmt.Errorf("cpu: pool2d backward: index %d outside a %d×%d plane", i, s.h, s.w)
	}
	return nil
}

// avgWindow returns the input rows [h0, h1) (and likewise columns) of output
// (oh, ow) for average pooling, clipped to the input, and the divisor.
func (s *poolShape) avgWindow(oh, ow int) (h0, h1, w0, w1, div int) {
	h0, w0 = oh*s.sh-s.ph, ow*s.sw-s.pw
	h1, w1 = min(h0+s.kh, s.h+s.ph), min(w0+s.kw, s.w+s.pw)
	div = (h1 - h0) * (w1 - w0)
	h0, w0 = max(h0, 0), max(w0, 0)
	h1, w1 = min(h1, s.h), min(w1, s.w)
	if !s.includePad {
		div = (h1 - h0) * (w1 - w0)
	}
	return h0, h1, w0, w1, div
}

// maxWindow returns the first row and column of output (oh, ow)'s window
// inside the input and the ends of its ranges (step dh and dw).
func (s *poolShape) maxWindow(oh, ow int) (h0, h1, w0, w1 int) {
	h0, w0 = oh*s.sh-s.ph, ow*s.sw-s.pw
	h1 = min(h0+(s.kh-1)*s.dh+1, s.h)
	w1 = min(w0+(s.kw-1)*s.dw+1, s.w)
	for h0 < 0 {
		h0 += s.dh
	}
	for w0 < 0 {
		w0 += s.dw
	}
	return h0, h1, w0, w1
}

// isMax2x2 reports whether s is max pooling's most common form: 2×2
// windows, stride 2, no padding or dilation.
func (s *poolShape) isMax2x2() bool {
	return s.kh == 2 && s.kw == 2 && s.sh == 2 && s.sw == 2 && s.ph == 0 && s.pw == 0 &&
		s.dh == 1 && s.dw == 1 && 2*s.oh <= s.h && 2*s.ow <= s.w
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
	best, at := T(math.Inf(-1)), h0*s.w+w0
	for ih := h0; ih < h1; ih += s.dh {
		for iw := w0; iw < w1; iw += s.dw {
			v := in[ih*s.w+iw]
			if v > best || v != v {
				best, at = v, ih*s.w+iw
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
		maxPool2x2(in, out, idx, s.w, s.oh, s.ow)
		return
	}
	for oh := range s.oh {
		for ow := range s.ow {
			b, at := maxOne(s, in, oh, ow)
			out[oh*s.ow+ow], idx[oh*s.ow+ow] = b, int64(at)
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
	ohLo := min((s.ph+s.sh-1)/s.sh, s.oh)
	ohHi := ohLo
	if num := s.h - 1 + s.ph - (s.kh-1)*s.dh; num >= 0 {
		ohHi = max(ohLo, min(s.oh, num/s.sh+1))
	}
	owLo := min((s.pw+1)/2, s.ow)
	owHi := owLo
	if num := s.w - 1 + s.pw - (s.kw-1)*s.dw; num >= 0 {
		owHi = max(owLo, min(s.ow, num/2+1))
	}
	if owLo == owHi {
		ohHi = ohLo
	}
	maxPoolBlock(s, in, out, idx, ohLo, ohHi, owLo, owHi)
	for oh := range s.oh {
		inner := oh >= ohLo && oh < ohHi
		for ow := range s.ow {
			if inner && ow >= owLo && ow < owHi {
				continue
			}
			b, at := maxOne(s, in, oh, ow)
			out[oh*s.ow+ow], idx[oh*s.ow+ow] = b, int64(at)
		}
	}
}

func poolForward[T float32 | float64](s *poolShape, op backend.PoolOp, x, y []T, idx []int64) {
	HW, OHW := s.h*s.w, s.oh*s.ow
	work := OHW * s.kh * s.kw
	parallelFor(s.planes, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			in, out := x[pl*HW:(pl+1)*HW], y[pl*OHW:(pl+1)*OHW]
			if op == backend.MaxPool {
				maxPoolPlane(s, in, out, idx[pl*OHW:(pl+1)*OHW])
				continue
			}
			for oh := range s.oh {
				for ow := range s.ow {
					o := oh*s.ow + ow
					h0, h1, w0, w1, div := s.avgWindow(oh, ow)
					if h0 >= h1 || w0 >= w1 {
						out[o] = 0
						continue
					}
					var sum T
					for ih := h0; ih < h1; ih++ {
						for _, v := range in[ih*s.w+w0 : ih*s.w+w1] {
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
	HW, OHW := s.h*s.w, s.oh*s.ow
	work := OHW
	if op == backend.AvgPool {
		work *= s.kh * s.kw
	}
	parallelFor(s.planes, max(1, minParallelFlops/max(1, work)), func(lo, hi int) {
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
			for oh := range s.oh {
				for ow := range s.ow {
					h0, h1, w0, w1, div := s.avgWindow(oh, ow)
					g := out[oh*s.ow+ow] / T(div)
					for ih := h0; ih < h1; ih++ {
						row := in[ih*s.w+w0 : ih*s.w+max(w0, w1)]
						for i := range row {
							row[i] += g
						}
					}
				}
			}
		}
	})
}
