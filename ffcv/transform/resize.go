package transform

import (
	"fmt"
	"math"
	"sync"
)

// Filter selects the resampling rule of Resize.
type Filter int

const (
	// Area is OpenCV's INTER_AREA (FFCV's choice), value for value.
	// Shrinking by integer factors on both axes averages each block of
	// source pixels; shrinking by other factors weights each source pixel
	// by the fraction of the output cell it covers (OpenCV's
	// computeResizeAreaTab), summed in float32 as OpenCV sums (see
	// area.go). When either axis is enlarged OpenCV switches to a bilinear
	// rule with area-specific coefficients, and so does Area.
	Area Filter = iota
	// Bilinear is torchvision's resize of a tensor with antialias=False,
	// i.e. torch.nn.functional.interpolate(mode="bilinear",
	// align_corners=False): two taps at source coordinate
	// max((i+½)·in/out − ½, 0). Shrinking by more than 2 aliases.
	Bilinear
	// BilinearAntialias is torchvision's resize with antialias=True (PIL's
	// BILINEAR): a triangle filter stretched by the shrink factor.
	BilinearAntialias
)

func (f Filter) String() string {
	switch f {
	case Area:
		return "area"
	case Bilinear:
		return "bilinear"
	case BilinearAntialias:
		return "bilinear-antialias"
	}
	return fmt.Sprintf("Filter(%d)", int(f))
}

// Fixed-point precision of the separable resampler: weights are multiples
// of 2⁻¹⁴; the horizontal pass keeps 7 fractional bits.
const (
	weightBits  = 14
	midBits     = 7
	cvCoefBits  = 11 // OpenCV's INTER_RESIZE_COEF_BITS
	cvCoefScale = 1 << cvCoefBits
)

// axisTab holds, for each output index along one axis, the first source
// index and maxN fixed-point weights (summing to 1<<weightBits), padded
// with zeros so that every output has the same number of taps and
// start+maxN ≤ the source length.
type axisTab struct {
	start []int32
	w     []int32 // out × maxN
	maxN  int
	tmp   []int32
}

type resizeScratch struct {
	x, y    axisTab
	ring    []int32 // maxN_y rows of dstW·C horizontal results
	ringRow []int32 // source row held by each ring slot
	acc     []int32
	fw      []float64
	// ax, ay, hrow (a ring of rows, with ringRow) and vsum serve Area
	// shrinking by fractional factors.
	ax, ay     areaAxis
	hrow, vsum []float32
	// cv selects OpenCV's fixed-point linear resampler (INTER_AREA with an
	// enlarged axis): weights in units of 2⁻¹¹, no rounding between the
	// passes, and the vertical pass of its SIMD kernel.
	cv bool
}

// scratches keeps the resize scratch spaces between calls. Unlike a
// sync.Pool it is not emptied by the garbage collector, so a loader's
// workers keep theirs and decoding allocates nothing once warm; it holds at
// most as many as ever ran at once.
var scratches struct {
	sync.Mutex
	free []*resizeScratch
}

// getScratch returns a free scratch space, or a new one.
func getScratch() *resizeScratch {
	scratches.Lock()
	defer scratches.Unlock()
	if n := len(scratches.free); n > 0 {
		s := scratches.free[n-1]
		scratches.free = scratches.free[:n-1]
		return s
	}
	return new(resizeScratch)
}

// putScratch gives s back for later calls.
func putScratch(s *resizeScratch) {
	scratches.Lock()
	scratches.free = append(scratches.free, s)
	scratches.Unlock()
}

// Resize writes the window r of src into dst, resampled with f to dst's
// size. The zero Rect means the whole of src. Crop and resize are one pass:
// only the pixels of r are read. src and dst must have the same number of
// channels and must not overlap. Resize allocates nothing at steady state
// (scratch tables come from a pool).
func Resize(dst, src Image, r Rect, f Filter) {
	dst.check("Resize")
	src.check("Resize")
	if r == (Rect{}) {
		r = src.Bounds()
	}
	if !r.In(src.Width, src.Height) {
		panic(fmt.Sprintf("transform: Resize: window %v outside %dx%d source", r, src.Width, src.Height))
	}
	if src.Channels != dst.Channels {
		panic(fmt.Sprintf("transform: Resize: %d-channel source into %d-channel destination", src.Channels, dst.Channels))
	}
	if dst.Width == 0 || dst.Height == 0 {
		return
	}
	if r.W == 0 || r.H == 0 {
		panic("transform: Resize: empty source window")
	}
	src = src.Sub(r)
	if src.Width == dst.Width && src.Height == dst.Height {
		copyImage(dst, src)
		return
	}
	if f == Area && src.Width >= dst.Width && src.Height >= dst.Height {
		resizeArea(dst, src)
		return
	}
	s := getScratch()
	s.cv = f == Area
	s.x.build(f, src.Width, dst.Width, &s.fw)
	s.y.build(f, src.Height, dst.Height, &s.fw)
	s.resample(dst, src)
	putScratch(s)
}

func copyImage(dst, src Image) {
	n := src.Width * src.Channels
	for y := 0; y < src.Height; y++ {
		copy(dst.Pix[y*dst.Stride:y*dst.Stride+n], src.Pix[y*src.Stride:y*src.Stride+n])
	}
}

// build fills the table for resampling in source samples to out samples.
// Area (an axis of it enlarged) uses OpenCV's area-mode linear
// coefficients.
func (t *axisTab) build(f Filter, in, out int, fwp *[]float64) {
	t.start = grow(t.start, out)
	scale := float64(in) / float64(out)
	var bound int
	switch {
	case f == Area || f == Bilinear:
		bound = 2
	case f == BilinearAntialias:
		bound = int(math.Ceil(max(scale, 1)))*2 + 2
	default:
		panic(fmt.Sprintf("transform: Resize: unknown filter %d", int(f)))
	}
	bound = min(bound, in)
	t.tmp = grow(t.tmp, out*(bound+1))
	fw := growF(*fwp, bound)
	*fwp = fw
	maxN := 0
	for i := 0; i < out; i++ {
		var first, n int
		switch {
		case f == Area:
			first, n = areaLinearWeights(fw, i, in, out)
		case f == Bilinear:
			first, n = bilinearWeights(fw, i, in, out)
		default:
			first, n = antialiasWeights(fw, i, in, scale)
		}
		maxN = max(maxN, n)
		t.start[i] = int32(first)
		row := t.tmp[i*(bound+1) : (i+1)*(bound+1)]
		row[bound] = int32(n)
		if f == Area {
			for j := range n {
				row[j] = int32(math.RoundToEven(fw[j] * cvCoefScale))
			}
			continue
		}
		quantize(row[:n], fw[:n])
	}
	// Pad every output to maxN taps, moving windows that would run past
	// the end to the left (their leading weights are then zero).
	t.maxN = maxN
	t.w = grow(t.w, out*maxN)
	for i := 0; i < out; i++ {
		row := t.tmp[i*(bound+1) : (i+1)*(bound+1)]
		n := int(row[bound])
		s := min(int(t.start[i]), in-maxN)
		shift := int(t.start[i]) - s
		t.start[i] = int32(s)
		w := t.w[i*maxN : (i+1)*maxN]
		clear(w)
		copy(w[shift:shift+n], row[:n])
	}
}

// areaLinearWeights is OpenCV's INTER_AREA coefficient rule in its linear
// resampler (used when an axis is enlarged), with its scales inv_scale =
// out/in and 1/inv_scale.
func areaLinearWeights(fw []float64, i, in, out int) (first, n int) {
	inv := float64(out) / float64(in)
	scale := 1 / inv
	sx := int(math.Floor(float64(i) * scale))
	fx := float64(float32(float64(i+1) - float64(sx+1)*inv))
	if fx <= 0 {
		fx = 0
	} else {
		fx -= math.Floor(fx)
	}
	if sx < 0 {
		sx, fx = 0, 0
	}
	if sx >= in-1 {
		fw[0] = 1
		return in - 1, 1
	}
	fw[0] = float64(1 - float32(fx))
	fw[1] = fx
	return sx, 2
}

// bilinearWeights follows PyTorch's upsample_bilinear2d (align_corners=False)
// in float32 arithmetic.
func bilinearWeights(fw []float64, i, in, out int) (first, n int) {
	scale := float32(in) / float32(out)
	src := scale*(float32(i)+0.5) - 0.5
	if src < 0 {
		src = 0
	}
	x0 := int(src)
	l1 := src - float32(x0)
	if x0 >= in-1 {
		fw[0] = 1
		return in - 1, 1
	}
	fw[0] = float64(1 - l1)
	fw[1] = float64(l1)
	return x0, 2
}

// antialiasWeights is PyTorch's _upsample_bilinear2d_aa / PIL's triangle
// filter for output index i.
func antialiasWeights(fw []float64, i, in int, scale float64) (first, n int) {
	support, inv := 1.0, 1.0
	if scale >= 1 {
		support, inv = scale, 1/scale
	}
	center := scale * (float64(i) + 0.5)
	xmin := max(int(center-support+0.5), 0)
	xmax := min(int(center+support+0.5), in)
	var total float64
	for j := xmin; j < xmax; j++ {
		x := math.Abs((float64(j) - center + 0.5) * inv)
		w := 0.0
		if x < 1 {
			w = 1 - x
		}
		fw[n] = w
		total += w
		n++
	}
	if total == 0 {
		fw[0], n = 1, 1
		return min(xmin, in-1), n
	}
	for j := range n {
		fw[j] /= total
	}
	return xmin, n
}

// quantize converts weights summing to 1 into fixed point summing exactly to
// 1<<weightBits (the rounding residue goes to the largest weight).
func quantize(dst []int32, w []float64) {
	var sum int32
	big := 0
	for j, v := range w {
		q := int32(math.Round(v * (1 << weightBits)))
		dst[j] = q
		sum += q
		if w[j] > w[big] {
			big = j
		}
	}
	dst[big] += 1<<weightBits - sum
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n, n+n/4)
	}
	return s[:n]
}

func growF(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n, n+n/4)
	}
	return s[:n]
}

// resample runs the horizontal pass row by row into a ring of maxN_y rows,
// then the vertical pass per output row.
func (s *resizeScratch) resample(dst, src Image) {
	c := src.Channels
	rowLen := dst.Width * c
	ringN := s.y.maxN
	s.ring = grow(s.ring, ringN*rowLen)
	s.ringRow = grow(s.ringRow, ringN)
	for i := range s.ringRow {
		s.ringRow[i] = -1
	}
	s.acc = grow(s.acc, rowLen)
	hshift := uint(weightBits - midBits)
	if s.cv {
		hshift = 0
	}
	var rows [8][]int32
	for y := 0; y < dst.Height; y++ {
		sy0 := int(s.y.start[y])
		for k := 0; k < ringN; k++ {
			sy := sy0 + k
			slot := sy % ringN
			row := s.ring[slot*rowLen : slot*rowLen+rowLen]
			if s.ringRow[slot] != int32(sy) {
				s.horizontal(row, src.Pix[sy*src.Stride:sy*src.Stride+src.Width*c], c, hshift)
				s.ringRow[slot] = int32(sy)
			}
			if k < len(rows) {
				rows[k] = row
			}
		}
		w := s.y.w[y*ringN : (y+1)*ringN]
		out := dst.Pix[y*dst.Stride : y*dst.Stride+rowLen]
		even := !s.cv && coarse(w)
		switch {
		case s.cv && ringN == 2:
			verticalCV2(out, rows[0], rows[1], w[0], w[1])
		case s.cv:
			acc := s.acc
			for k := 0; k < ringN; k++ {
				sy := sy0 + k
				row := s.ring[(sy%ringN)*rowLen : (sy%ringN)*rowLen+rowLen]
				wk := w[k]
				if k == 0 {
					for i, v := range row {
						acc[i] = (v >> 4) * wk >> 16
					}
				} else {
					for i, v := range row {
						acc[i] += (v >> 4) * wk >> 16
					}
				}
			}
			for i, v := range acc {
				out[i] = uint8(min(max((v+2)>>2, 0), 255))
			}
		case ringN == 2:
			vertical2(out, rows[0], rows[1], w[0], w[1], even)
		case ringN == 3:
			vertical3(out, rows[0], rows[1], rows[2], w[0], w[1], w[2], even)
		default:
			acc := s.acc
			for k := 0; k < ringN; k++ {
				sy := sy0 + k
				row := s.ring[(sy%ringN)*rowLen : (sy%ringN)*rowLen+rowLen]
				wk := w[k]
				if k == 0 {
					for i, v := range row {
						acc[i] = v * wk
					}
				} else {
					for i, v := range row {
						acc[i] += v * wk
					}
				}
			}
			if even {
				for i, v := range acc {
					out[i] = roundEven(v)
				}
			} else {
				for i, v := range acc {
					out[i] = uint8((v + vHalf) >> vShift)
				}
			}
		}
	}
}

// The vertical sums are descaled rounding half to even, as torch.round and
// OpenCV's cvRound do. Ties are frequent only when an output row's weights
// are coarse fractions (1, ½, ¼, …); for other rows the cheaper half-up
// rounding almost always gives the same results, and the resampler uses it. The weights are non-negative and sum
// to one, and the horizontal results are at most 255·2^midBits, so sums
// need no saturation.
const (
	vShift = weightBits + midBits
	vHalf  = 1 << (vShift - 1)
)

func roundEven(v int32) uint8 {
	return uint8((v + vHalf - 1 + (v>>vShift)&1) >> vShift)
}

func vertical2(out []uint8, r0, r1 []int32, w0, w1 int32, even bool) {
	r0 = r0[:len(out)]
	r1 = r1[:len(out)]
	if even {
		for i := range out {
			out[i] = roundEven(r0[i]*w0 + r1[i]*w1)
		}
		return
	}
	for i := range out {
		out[i] = uint8((r0[i]*w0 + r1[i]*w1 + vHalf) >> vShift)
	}
}

func vertical3(out []uint8, r0, r1, r2 []int32, w0, w1, w2 int32, even bool) {
	r0 = r0[:len(out)]
	r1 = r1[:len(out)]
	r2 = r2[:len(out)]
	if even {
		for i := range out {
			out[i] = roundEven(r0[i]*w0 + r1[i]*w1 + r2[i]*w2)
		}
		return
	}
	for i := range out {
		out[i] = uint8((r0[i]*w0 + r1[i]*w1 + r2[i]*w2 + vHalf) >> vShift)
	}
}

// coarse reports whether all weights are multiples of 1/64, so that exact
// rounding ties are likely.
func coarse(w []int32) bool {
	for _, v := range w {
		if v&(1<<(weightBits-6)-1) != 0 {
			return false
		}
	}
	return true
}

// verticalCV2 is the vertical pass of OpenCV's VResizeLinearVec_32s8u.
func verticalCV2(out []uint8, r0, r1 []int32, w0, w1 int32) {
	r0 = r0[:len(out)]
	r1 = r1[:len(out)]
	i := 0
	if blocks := len(out) / 16; resizeVector && blocks > 0 {
		verticalCV2AVX2(&out[0], &r0[0], &r1[0], blocks, w0, w1)
		i = 16 * blocks
	}
	verticalCV2Go(out[i:], r0[i:], r1[i:], w0, w1)
}

// verticalCV2Go is verticalCV2 in Go.
func verticalCV2Go(out []uint8, r0, r1 []int32, w0, w1 int32) {
	r0 = r0[:len(out)]
	r1 = r1[:len(out)]
	for i := range out {
		v := ((r0[i]>>4)*w0>>16 + (r1[i]>>4)*w1>>16 + 2) >> 2
		out[i] = uint8(min(max(v, 0), 255))
	}
}

// horizontal resamples one source row into out, shifting sums right by
// shift with rounding (0: kept exact).
func (s *resizeScratch) horizontal(out []int32, in []uint8, c int, shift uint) {
	t := &s.x
	round := int32(0)
	if shift > 0 {
		round = 1 << (shift - 1)
	}
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
			o[0] = (w0*int32(p[0]) + w1*int32(p[3]) + round) >> shift
			o[1] = (w0*int32(p[1]) + w1*int32(p[4]) + round) >> shift
			o[2] = (w0*int32(p[2]) + w1*int32(p[5]) + round) >> shift
		}
	case c == 3 && n == 3:
		out = out[:3*len(t.start)]
		for x, st := range t.start {
			i := int(st) * 3
			p := in[i : i+9 : i+9]
			w := t.w[3*x : 3*x+3 : 3*x+3]
			w0, w1, w2 := w[0], w[1], w[2]
			o := out[3*x : 3*x+3 : 3*x+3]
			o[0] = (w0*int32(p[0]) + w1*int32(p[3]) + w2*int32(p[6]) + round) >> shift
			o[1] = (w0*int32(p[1]) + w1*int32(p[4]) + w2*int32(p[7]) + round) >> shift
			o[2] = (w0*int32(p[2]) + w1*int32(p[5]) + w2*int32(p[8]) + round) >> shift
		}
	case c == 3:
		for x, st := range t.start {
			i := int(st) * 3
			w := t.w[x*n : x*n+n]
			p := in[i : i+3*n]
			var a0, a1, a2 int32
			for k, wk := range w {
				q := p[3*k : 3*k+3 : 3*k+3]
				a0 += wk * int32(q[0])
				a1 += wk * int32(q[1])
				a2 += wk * int32(q[2])
			}
			o := out[3*x : 3*x+3 : 3*x+3]
			o[0] = (a0 + round) >> shift
			o[1] = (a1 + round) >> shift
			o[2] = (a2 + round) >> shift
		}
	case c == 1:
		for x, st := range t.start {
			i := int(st)
			w := t.w[x*n : x*n+n]
			p := in[i : i+n]
			var a int32
			for k, wk := range w {
				a += wk * int32(p[k])
			}
			out[x] = (a + round) >> shift
		}
	default:
		for x, st := range t.start {
			i := int(st) * c
			w := t.w[x*n : x*n+n]
			for ch := 0; ch < c; ch++ {
				var a int32
				for k, wk := range w {
					a += wk * int32(in[i+k*c+ch])
				}
				out[x*c+ch] = (a + round) >> shift
			}
		}
	}
}
