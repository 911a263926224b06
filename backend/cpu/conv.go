package cpu

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/flockml/flock/backend"
)

// The convolutions lower to matrix products (Chellapilla et al., "High
// Performance Convolutional Neural Networks for Document Processing", 2006).
// For sample n and group g, with P = OH·OW output positions and
// R = (C/groups)·KH·KW window taps, im2col gathers the columns
//
//	col[(c, kh, kw), (oh, ow)] = x[n, g·C/groups + c, oh·sh − ph + kh·dh, ow·sw − pw + kw·dw]
//
// (zero outside the input), so that
//
//	forward:          y[n, g]  = w[g] · col                (O/groups × P)
//	backward, data:   dx[n, g] = col2im(w[g]ᵀ · dy[n, g])  (col2im adds each tap back)
//	backward, weight: dw[g]   += dy[n, g] · colᵀ           (summed over n)
//
// Every product goes through gemm; a 1×1 kernel with stride 1 and no padding
// uses x itself as col. The work is cut into tasks of one sample and a range
// of output positions (a range of input channels for the data gradient), each
// with im2col scratch from a pool, so that the columns stay in cache and a
// training step at steady state allocates no new scratch.

// convShape is a validated convolution.
type convShape struct {
	n, c, h, w     int
	o, kh, kw      int
	oh, ow         int
	sh, sw         int
	ph, pw         int
	dh, dw         int
	groups, cg, og int
}

// taps is R, the rows of a group's im2col matrix.
func (s *convShape) taps() int { return s.cg * s.kh * s.kw }

// positions is P, the output positions of one plane.
func (s *convShape) positions() int { return s.oh * s.ow }

// pointwise reports whether im2col is the identity (1×1 kernel, stride 1,
// no padding), so that x itself serves as the column matrix.
func (s *convShape) pointwise() bool {
	return s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0
}

// chunk is the number of output positions per task: a column block of about
// 64k scratch elements, at least 64 wide.
func (s *convShape) chunk() int {
	p := s.positions()
	pc := max(64, (1<<16)/max(1, s.taps()))
	return max(1, min(p, roundUp(pc, 16)))
}

func convGeometry(kernel string, x, w, y backend.View, p backend.ConvParams) (convShape, error) {
	var s convShape
	fail := func(format string, args ...any) (convShape, error) {
		return s, fmt.Errorf("cpu: %s: x%v, w%v, y%v, %+v: %s", kernel, x.Shape, w.Shape, y.Shape, p, fmt.Sprintf(format, args...))
	}
	dt := x.DType
	if dt != backend.Float32 && dt != backend.Float64 {
		return fail("dtype %v, want float32 or float64", dt)
	}
	if w.DType != dt || y.DType != dt {
		return fail("dtypes %v, %v and %v differ", x.DType, w.DType, y.DType)
	}
	if len(x.Shape) != 4 || len(w.Shape) != 4 || len(y.Shape) != 4 {
		return fail("operands must be 4-D")
	}
	for i, v := range []backend.View{x, w, y} {
		if !v.IsContiguous() || !fits(v) {
			return fail("operand %d is not a contiguous view inside its buffer", i)
		}
	}
	if p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 || p.PadH < 0 || p.PadW < 0 || p.Groups < 1 {
		return fail("strides, dilations and groups must be ≥ 1 and padding ≥ 0")
	}
	s = convShape{
		n: x.Shape[0], c: x.Shape[1], h: x.Shape[2], w: x.Shape[3],
		o: w.Shape[0], kh: w.Shape[2], kw: w.Shape[3],
		sh: p.StrideH, sw: p.StrideW, ph: p.PadH, pw: p.PadW, dh: p.DilationH, dw: p.DilationW,
		groups: p.Groups,
	}
	if s.c%s.groups != 0 || s.o%s.groups != 0 {
		return fail("groups %d do not divide %d input and %d output channels", s.groups, s.c, s.o)
	}
	s.cg, s.og = s.c/s.groups, s.o/s.groups
	if w.Shape[1] != s.cg {
		return fail("weight has %d input channels per group, want %d", w.Shape[1], s.cg)
	}
	if s.kh < 1 || s.kw < 1 {
		return fail("empty kernel")
	}
	s.oh, s.ow = p.OutputSize(s.h, s.w, s.kh, s.kw)
	if s.oh < 1 || s.ow < 1 || s.h+2*s.ph < s.dh*(s.kh-1)+1 || s.w+2*s.pw < s.dw*(s.kw-1)+1 {
		return fail("the dilated kernel does not fit the padded input")
	}
	if want := (backend.Shape{s.n, s.o, s.oh, s.ow}); !y.Shape.Equal(want) {
		return fail("output shape must be %v", want)
	}
	return s, nil
}

// Conv2d implements backend.Backend.
func (c *Backend) Conv2d(dst, x, w backend.View, p backend.ConvParams) error {
	s, err := convGeometry("conv2d", x, w, dst, p)
	if err != nil {
		return err
	}
	switch x.DType {
	case backend.Float32:
		convForward(&s, x.Offset, w.Offset, dst.Offset, F32(x), F32(w), F32(dst))
	case backend.Float64:
		convForward(&s, x.Offset, w.Offset, dst.Offset, F64(x), F64(w), F64(dst))
	}
	return nil
}

// Conv2dBackwardData implements backend.Backend.
func (c *Backend) Conv2dBackwardData(dx, dy, w backend.View, p backend.ConvParams) error {
	s, err := convGeometry("conv2d backward data", dx, w, dy, p)
	if err != nil {
		return err
	}
	switch dx.DType {
	case backend.Float32:
		convBackwardData(&s, dx.Offset, w.Offset, dy.Offset, F32(dx), F32(w), F32(dy))
	case backend.Float64:
		convBackwardData(&s, dx.Offset, w.Offset, dy.Offset, F64(dx), F64(w), F64(dy))
	}
	return nil
}

// Conv2dBackwardWeight implements backend.Backend.
func (c *Backend) Conv2dBackwardWeight(dw, x, dy backend.View, p backend.ConvParams) error {
	s, err := convGeometry("conv2d backward weight", x, dw, dy, p)
	if err != nil {
		return err
	}
	switch x.DType {
	case backend.Float32:
		convBackwardWeight(&s, x.Offset, dw.Offset, dy.Offset, F32(x), F32(dw), F32(dy))
	case backend.Float64:
		convBackwardWeight(&s, x.Offset, dw.Offset, dy.Offset, F64(x), F64(dw), F64(dy))
	}
	return nil
}

// convForward computes y = conv(x, w); xo, wo and yo are the views' offsets.
func convForward[T float32 | float64](s *convShape, xo, wo, yo int, x, w, y []T) {
	P, R := s.positions(), s.taps()
	pc := s.chunk()
	chunks := (P + pc - 1) / pc
	flops := 2 * s.og * R * pc * s.groups
	parallelFor(s.n*chunks, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
		var col *[]T
		if !s.pointwise() {
			col = getScratch[T](R * pc)
			defer putScratch(col)
		}
		for u := lo; u < hi; u++ {
			n, p0 := u/chunks, u%chunks*pc
			np := min(pc, P-p0)
			for g := range s.groups {
				xg := xo + (n*s.c+g*s.cg)*s.h*s.w
				b, ldb := x[xg+p0:], P
				if col != nil {
					im2col(s, x[xg:], p0, np, *col)
					b, ldb = *col, np
				}
				gemm(false, false, s.og, np, R, 1, w[wo+g*s.og*R:], R, b, ldb, 0,
					y[yo+(n*s.o+g*s.og)*P+p0:], P)
			}
		}
	})
}

// convBackwardData computes dx from dy and w. Tasks own disjoint channel
// ranges of one sample, since col2im's windows overlap within a plane.
func convBackwardData[T float32 | float64](s *convShape, dxo, wo, dyo int, dx, w, dy []T) {
	P, R, HW := s.positions(), s.taps(), s.h*s.w
	KK := s.kh * s.kw
	pc := s.chunk()
	// Cut each group's channels into blocks so that there are several tasks
	// per worker even for one sample.
	cb := s.cg
	if tasks := s.n * s.groups; tasks < 8*runtime.GOMAXPROCS(0) {
		cb = max(1, s.cg*tasks/(8*runtime.GOMAXPROCS(0)))
	}
	blocks := (s.cg + cb - 1) / cb
	flops := 2 * cb * KK * s.og * P
	parallelFor(s.n*s.groups*blocks, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
		var col *[]T
		if !s.pointwise() {
			col = getScratch[T](cb * KK * pc)
			defer putScratch(col)
		}
		for u := lo; u < hi; u++ {
			n, g, c0 := u/(s.groups*blocks), u/blocks%s.groups, u%blocks*cb
			nc := min(cb, s.cg-c0)
			dxc := dx[dxo+(n*s.c+g*s.cg+c0)*HW:]
			wg := w[wo+g*s.og*R+c0*KK:]
			dyg := dy[dyo+(n*s.o+g*s.og)*P:]
			if col == nil {
				gemm(true, false, nc, P, s.og, 1, wg, R, dyg, P, 0, dxc, P)
				continue
			}
			clear(dxc[:nc*HW])
			for p0 := 0; p0 < P; p0 += pc {
				np := min(pc, P-p0)
				gemm(true, false, nc*KK, np, s.og, 1, wg, R, dyg[p0:], P, 0, *col, np)
				col2im(s, nc, (*col)[:nc*KK*np], p0, np, dxc)
			}
		}
	})
}

// convBackwardWeight computes dw from x and dy. Each worker sums its tasks'
// products into its own partial dw; the partials are added at the end.
func convBackwardWeight[T float32 | float64](s *convShape, xo, dwo, dyo int, x, dw, dy []T) {
	P, R := s.positions(), s.taps()
	pc := s.chunk()
	chunks := (P + pc - 1) / pc
	size := s.o * R
	out := dw[dwo : dwo+size]
	var (
		mu       sync.Mutex
		partials []*[]T
	)
	flops := 2 * s.og * R * pc * s.groups
	parallelFor(s.n*chunks, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
		acc := out
		if lo > 0 {
			part := getScratch[T](size)
			acc = *part
			mu.Lock()
			partials = append(partials, part)
			mu.Unlock()
		}
		clear(acc)
		var col *[]T
		if !s.pointwise() {
			col = getScratch[T](R * pc)
			defer putScratch(col)
		}
		for u := lo; u < hi; u++ {
			n, p0 := u/chunks, u%chunks*pc
			np := min(pc, P-p0)
			for g := range s.groups {
				xg := xo + (n*s.c+g*s.cg)*s.h*s.w
				b, ldb := x[xg+p0:], P
				if col != nil {
					im2col(s, x[xg:], p0, np, *col)
					b, ldb = *col, np
				}
				gemm(false, true, s.og, R, np, 1, dy[dyo+(n*s.o+g*s.og)*P+p0:], P, b, ldb, 1,
					acc[g*s.og*R:], R)
			}
		}
	})
	if s.n*chunks == 0 {
		clear(out)
	}
	if len(partials) == 0 {
		return
	}
	parallelFor(size, 1<<14, func(lo, hi int) {
		for _, part := range partials {
			for i, v := range (*part)[lo:hi] {
				out[lo+i] += v
			}
		}
	})
	for _, part := range partials {
		putScratch(part)
	}
}

// im2col writes the column matrix of one group (x holds the group's cg
// planes from its first element) for output positions [p0, p0+np) into col,
// a row-major R×np matrix.
func im2col[T float32 | float64](s *convShape, x []T, p0, np int, col []T) {
	convWalk(s, s.cg, p0, np, func(c, row, src, ow0, ow1, valid0, valid1, iw0 int) {
		dst := col[row : row+ow1-ow0]
		if src < 0 {
			clear(dst)
			return
		}
		clear(dst[:valid0-ow0])
		clear(dst[valid1-ow0:])
		in := x[c*s.h*s.w+src:]
		j := valid0 - ow0
		if s.sw == 1 {
			copy(dst[j:valid1-ow0], in[iw0+valid0:])
			return
		}
		for ow := valid0; ow < valid1; ow++ {
			dst[j] = in[iw0+ow*s.sw]
			j++
		}
	})
}

// col2im adds a column matrix (nc·KH·KW rows of np positions from p0) back
// into the nc input planes starting at dx.
func col2im[T float32 | float64](s *convShape, nc int, col []T, p0, np int, dx []T) {
	convWalk(s, nc, p0, np, func(c, row, src, ow0, ow1, valid0, valid1, iw0 int) {
		if src < 0 {
			return
		}
		in := dx[c*s.h*s.w+src:]
		j := row + valid0 - ow0
		if s.sw == 1 {
			seg := in[iw0+valid0 : iw0+valid1]
			for i, v := range col[j : j+len(seg)] {
				seg[i] += v
			}
			return
		}
		for ow := valid0; ow < valid1; ow++ {
			in[iw0+ow*s.sw] += col[j]
			j++
		}
	})
}

// convWalk visits, for channels [0, nc) and every tap (kh, kw), each run of
// output positions in [p0, p0+np) that share an output row oh. fn gets the
// channel, the run's start in the R×np column matrix (row), the element offset of input row
// ih within its plane (src, −1 when ih is in the padding), the run's output
// columns [ow0, ow1), the sub-range [valid0, valid1) whose input columns
// iw = iw0 + ow·sw lie inside the plane, and iw0 = kw·dw − pw.
func convWalk(s *convShape, nc, p0, np int, fn func(c, row, src, ow0, ow1, valid0, valid1, iw0 int)) {
	for c := range nc {
		for kh := range s.kh {
			for kw := range s.kw {
				r := ((c*s.kh)+kh)*s.kw + kw
				iw0 := kw*s.dw - s.pw
				// ow with 0 ≤ iw0 + ow·sw < W.
				lo := 0
				if iw0 < 0 {
					lo = (-iw0 + s.sw - 1) / s.sw
				}
				hi := 0
				if s.w-iw0 > 0 {
					hi = (s.w - iw0 + s.sw - 1) / s.sw
				}
				lo, hi = min(lo, s.ow), min(hi, s.ow)
				for p := p0; p < p0+np; {
					oh, ow0 := p/s.ow, p%s.ow
					ow1 := min(s.ow, ow0+p0+np-p)
					ih := oh*s.sh - s.ph + kh*s.dh
					src := -1
					if ih >= 0 && ih < s.h {
						src = ih * s.w
					}
					v0 := min(max(lo, ow0), ow1)
					v1 := max(min(hi, ow1), v0)
					fn(c, r*np+p-p0, src, ow0, ow1, v0, v1, iw0)
					p += ow1 - ow0
				}
			}
		}
	}
}
