package transform

import "math"

// Shrinking with Area follows OpenCV's INTER_AREA (cv::resize in
// modules/imgproc/src/resize.cpp) value for value. OpenCV computes the scale
// of an axis as 1/(out/in) in float64 and chooses between two routines:
//
//   - resizeAreaFast_, when both scales are within DBL_EPSILON of integers
//     kx, ky: each output is the sum of its kx×ky block times the float32
//     1/(kx·ky), rounded half to even; 2×2 blocks of 1, 3 or 4 channels are
//     instead (sum+2)>>2 (its vector kernel). 1/(1/49) is 49.00000000000001,
//     so a factor of 49 (or 93, 98, …) takes the fractional routine.
//   - resizeArea_ otherwise (one or both factors fractional): per-axis
//     tables of float32 weights (computeResizeAreaTab: the fraction of the
//     output cell each source sample covers; partial pieces shorter than
//     1e-3 of a pixel are dropped); a
//     source row is resampled horizontally into float32 sums, in table
//     order, and the rows of an output row are added in float32 weighted by
//     their vertical weights, then rounded half to even and saturated.
//
// The Go code performs the same float32 operations in the same order, each
// product rounded to float32 before it is added (the explicit conversions
// keep the compiler from fusing them into FMAs), so the results are
// bit-identical on every architecture.

// dblEpsilon is C's DBL_EPSILON.
const dblEpsilon = 0x1p-52

// cvScale is OpenCV's scale of an axis resized from in to out samples:
// 1/inv_scale with inv_scale = out/in, in float64.
func cvScale(in, out int) float64 {
	return 1 / (float64(out) / float64(in))
}

// cvIntScale reports OpenCV's integer scale k of an axis and whether the
// scale counts as that integer (is_area_fast, per axis).
func cvIntScale(scale float64) (k int, ok bool) {
	r := math.RoundToEven(scale)
	return int(r), math.Abs(scale-r) < dblEpsilon
}

// cvRound8 is saturate_cast<uchar>(float): round half to even (cvRound),
// then clamp to 0..255. Adding 2²³ in float32 leaves no fractional bits,
// so the float32 sum is v rounded half to even, for |v| < 2²².
func cvRound8(v float32) uint8 {
	r := int32(float32(v+0x1p23)) - 1<<23
	return uint8(min(max(r, 0), 255))
}

// resizeArea shrinks src (no axis enlarged) into dst as cv::resize with
// INTER_AREA does.
func resizeArea(dst, src Image) {
	scaleX, scaleY := cvScale(src.Width, dst.Width), cvScale(src.Height, dst.Height)
	kx, okx := cvIntScale(scaleX)
	ky, oky := cvIntScale(scaleY)
	if okx && oky {
		areaInt(dst, src, kx, ky)
		return
	}
	s := getScratch()
	s.ax.build(src.Width, dst.Width, scaleX, true)
	s.ay.build(src.Height, dst.Height, scaleY, false)
	s.areaFrac(dst, src)
	putScratch(s)
}

// areaInt is resizeAreaFast_ for uint8: integer factors kx, ky.
func areaInt(dst, src Image, kx, ky int) {
	c := src.Channels
	rowLen := dst.Width * c
	if kx == 2 && ky == 2 && (c == 1 || c == 3 || c == 4) {
		for y := 0; y < dst.Height; y++ {
			out := dst.Pix[y*dst.Stride : y*dst.Stride+rowLen]
			r0 := src.Pix[2*y*src.Stride:]
			r1 := src.Pix[(2*y+1)*src.Stride:]
			if c == 3 {
				for x := 0; x < dst.Width; x++ {
					o := x * 3
					i := x * 6
					a := r0[i : i+6 : i+6]
					b := r1[i : i+6 : i+6]
					out[o] = uint8((uint32(a[0]) + uint32(a[3]) + uint32(b[0]) + uint32(b[3]) + 2) >> 2)
					out[o+1] = uint8((uint32(a[1]) + uint32(a[4]) + uint32(b[1]) + uint32(b[4]) + 2) >> 2)
					out[o+2] = uint8((uint32(a[2]) + uint32(a[5]) + uint32(b[2]) + uint32(b[5]) + 2) >> 2)
				}
				continue
			}
			for i := range out {
				x, ch := i/c, i%c
				j := 2*x*c + ch
				out[i] = uint8((uint32(r0[j]) + uint32(r0[j+c]) + uint32(r1[j]) + uint32(r1[j+c]) + 2) >> 2)
			}
		}
		return
	}
	scale := 1 / float32(kx*ky)
	for y := 0; y < dst.Height; y++ {
		out := dst.Pix[y*dst.Stride : y*dst.Stride+rowLen]
		for x := 0; x < dst.Width; x++ {
			for ch := 0; ch < c; ch++ {
				var sum int32
				for j := 0; j < ky; j++ {
					row := src.Pix[(y*ky+j)*src.Stride+x*kx*c+ch:]
					for i := 0; i < kx; i++ {
						sum += int32(row[i*c])
					}
				}
				out[x*c+ch] = cvRound8(float32(float32(sum) * scale))
			}
		}
	}
}

// areaAxis is computeResizeAreaTab for one axis: output i adds the source
// samples start[i], start[i]+1, … with the float32 weights w[i·maxN:],
// n[i] of them, or maxN when padded.
type areaAxis struct {
	start []int32
	n     []int32
	w     []float32 // out × maxN
	maxN  int
	tmp   []float32
}

// build fills the table for in source samples to out (scale as cvScale).
// With pad, every output gets maxN weights: zeros after its own, and
// windows that would run past the end move left behind leading zeros. Adding
// a zero product to a non-negative float32 sum leaves it unchanged, so
// padding changes no result.
func (t *areaAxis) build(in, out int, scale float64, pad bool) {
	bound := min(int(scale)+2, in)
	t.start = grow(t.start, out)
	t.n = grow(t.n, out)
	t.tmp = growF32(t.tmp, out*bound)
	maxN := 0
	for i := 0; i < out; i++ {
		w := t.tmp[i*bound : (i+1)*bound]
		fsx1 := float64(i) * scale
		fsx2 := fsx1 + scale
		cell := math.Min(scale, float64(in)-fsx1)
		sx1 := int(math.Ceil(fsx1))
		sx2 := min(int(math.Floor(fsx2)), in-1)
		sx1 = min(sx1, sx2)
		first, n := sx1, 0
		if float64(sx1)-fsx1 > 1e-3 {
			first = sx1 - 1
			w[n] = float32((float64(sx1) - fsx1) / cell)
			n++
		}
		for sx := sx1; sx < sx2; sx++ {
			w[n] = float32(1 / cell)
			n++
		}
		if fsx2-float64(sx2) > 1e-3 {
			w[n] = float32(math.Min(math.Min(fsx2-float64(sx2), 1), cell) / cell)
			n++
		}
		t.start[i] = int32(first)
		t.n[i] = int32(n)
		maxN = max(maxN, n)
	}
	t.maxN = maxN
	t.w = growF32(t.w, out*maxN)
	for i := 0; i < out; i++ {
		n := int(t.n[i])
		shift := 0
		if pad {
			s := min(int(t.start[i]), in-maxN)
			shift = int(t.start[i]) - s
			t.start[i] = int32(s)
		}
		w := t.w[i*maxN : (i+1)*maxN]
		clear(w)
		copy(w[shift:shift+n], t.tmp[i*bound:i*bound+n])
	}
}

// areaFrac is resizeArea_ for uint8, the tables built. Horizontal results
// are kept in a ring of rows (a source row serves up to two output rows);
// the vertical sums are formed in OpenCV's order, first row first.
func (s *resizeScratch) areaFrac(dst, src Image) {
	c := src.Channels
	rowLen := dst.Width * c
	ay := &s.ay
	ringN := ay.maxN
	s.hrow = growF32(s.hrow, ringN*rowLen)
	s.vsum = growF32(s.vsum, rowLen)
	s.ringRow = grow(s.ringRow, ringN)
	for i := range s.ringRow {
		s.ringRow[i] = -1
	}
	row := func(sy int) []float32 {
		slot := sy % ringN
		r := s.hrow[slot*rowLen : (slot+1)*rowLen]
		if s.ringRow[slot] != int32(sy) {
			s.areaRow(r, src.Pix[sy*src.Stride:sy*src.Stride+src.Width*c], c)
			s.ringRow[slot] = int32(sy)
		}
		return r
	}
	for y := 0; y < dst.Height; y++ {
		sy0, n := int(ay.start[y]), int(ay.n[y])
		beta := ay.w[y*ringN : y*ringN+n]
		out := dst.Pix[y*dst.Stride : y*dst.Stride+rowLen]
		switch n {
		case 1:
			r0, b0 := row(sy0), beta[0]
			for i, v := range r0 {
				out[i] = cvRound8(float32(b0 * v))
			}
		case 2:
			r0, r1 := row(sy0), row(sy0+1)
			r1 = r1[:len(r0)]
			b0, b1 := beta[0], beta[1]
			for i, v := range r0 {
				out[i] = cvRound8(float32(b0*v) + float32(b1*r1[i]))
			}
		case 3:
			r0, r1, r2 := row(sy0), row(sy0+1), row(sy0+2)
			r1, r2 = r1[:len(r0)], r2[:len(r0)]
			b0, b1, b2 := beta[0], beta[1], beta[2]
			for i, v := range r0 {
				out[i] = cvRound8(float32(b0*v) + float32(b1*r1[i]) + float32(b2*r2[i]))
			}
		default:
			vsum := s.vsum
			for k, bk := range beta {
				r := row(sy0 + k)
				switch {
				case k == 0:
					for i, v := range r {
						vsum[i] = float32(bk * v)
					}
				case k < n-1:
					for i, v := range r {
						vsum[i] += float32(bk * v)
					}
				default:
					for i, v := range r {
						out[i] = cvRound8(vsum[i] + float32(bk*v))
					}
				}
			}
		}
	}
}

// areaRow resamples one source row into out with the horizontal table
// (padded): out[x·c+ch] = Σₖ in[(start+k)·c+ch]·w[k], summed in order.
func (s *resizeScratch) areaRow(out []float32, in []uint8, c int) {
	t := &s.ax
	n := t.maxN
	switch {
	case c == 3 && n == 2:
		out = out[:3*len(t.start)]
		for x, st := range t.start {
			i := int(st) * 3
			p := in[i : i+6 : i+6]
			w := t.w[2*x : 2*x+2 : 2*x+2]
			w0, w1 := w[0], w[1]
			o := out[3*x : 3*x+3 : 3*x+3]
			o[0] = float32(u8f32[p[0]]*w0) + float32(u8f32[p[3]]*w1)
			o[1] = float32(u8f32[p[1]]*w0) + float32(u8f32[p[4]]*w1)
			o[2] = float32(u8f32[p[2]]*w0) + float32(u8f32[p[5]]*w1)
		}
	case c == 3 && n == 3:
		out = out[:3*len(t.start)]
		for x, st := range t.start {
			i := int(st) * 3
			p := in[i : i+9 : i+9]
			w := t.w[3*x : 3*x+3 : 3*x+3]
			w0, w1, w2 := w[0], w[1], w[2]
			o := out[3*x : 3*x+3 : 3*x+3]
			o[0] = float32(u8f32[p[0]]*w0) + float32(u8f32[p[3]]*w1) + float32(u8f32[p[6]]*w2)
			o[1] = float32(u8f32[p[1]]*w0) + float32(u8f32[p[4]]*w1) + float32(u8f32[p[7]]*w2)
			o[2] = float32(u8f32[p[2]]*w0) + float32(u8f32[p[5]]*w1) + float32(u8f32[p[8]]*w2)
		}
	case c == 3:
		for x, st := range t.start {
			i := int(st) * 3
			w := t.w[x*n : x*n+n]
			p := in[i : i+3*n]
			var a0, a1, a2 float32
			for k, wk := range w {
				q := p[3*k : 3*k+3 : 3*k+3]
				a0 += float32(u8f32[q[0]] * wk)
				a1 += float32(u8f32[q[1]] * wk)
				a2 += float32(u8f32[q[2]] * wk)
			}
			o := out[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = a0, a1, a2
		}
	case c == 1:
		for x, st := range t.start {
			i := int(st)
			w := t.w[x*n : x*n+n]
			p := in[i : i+n]
			var a float32
			for k, wk := range w {
				a += float32(u8f32[p[k]] * wk)
			}
			out[x] = a
		}
	default:
		for x, st := range t.start {
			i := int(st) * c
			w := t.w[x*n : x*n+n]
			for ch := 0; ch < c; ch++ {
				var a float32
				for k, wk := range w {
					a += float32(u8f32[in[i+k*c+ch]] * wk)
				}
				out[x*c+ch] = a
			}
		}
	}
}

// u8f32 holds float32(v) for every uint8 v; a load is cheaper than the
// conversion.
var u8f32 = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return t
}()

func growF32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n, n+n/4)
	}
	return s[:n]
}
