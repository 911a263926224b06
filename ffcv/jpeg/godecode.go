package jpeg

import (
	"errors"
	"fmt"

	"github.com/flockml/flock/ffcv/transform"
)

// Markers (ITU T.81 Table B.1).
const (
	mSOF0 = 0xc0 // baseline
	mSOF1 = 0xc1 // extended sequential, Huffman
	mSOF2 = 0xc2 // progressive, Huffman
	mDHT  = 0xc4
	mRST0 = 0xd0
	mSOI  = 0xd8
	mEOI  = 0xd9
	mSOS  = 0xda
	mDQT  = 0xdb
	mDRI  = 0xdd
	mAPP0 = 0xe0
	mAPPE = 0xee
	mTEM  = 0x01
)

// zigzag[k] is the natural (row-major) index of the k-th coefficient in
// zig-zag order.
var zigzag = [64 + 16]uint8{
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
	// Extra entries absorb a run past the end in corrupt data; the
	// decoder rejects such blocks right after.
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
}

var (
	errTruncated = errors.New("jpeg: decode: truncated or corrupt entropy-coded data")
	errNoSOI     = errors.New("jpeg: decode: missing SOI marker")
)

func formatErr(msg string) error { return errors.New("jpeg: decode: " + msg) }

// segment reads the length-prefixed segment after the marker at data[pos-2:pos].
func segment(data []byte, pos int) ([]byte, error) {
	if pos+2 > len(data) {
		return nil, formatErr("truncated marker segment")
	}
	n := int(data[pos])<<8 | int(data[pos+1])
	if n < 2 || pos+n > len(data) {
		return nil, formatErr("marker segment length out of range")
	}
	return data[pos+2 : pos+n], nil
}

// nextMarker finds the marker at or after pos, skipping fill bytes, and
// returns it with the position after it. Bytes that are not a marker are an
// error.
func nextMarker(data []byte, pos int) (marker byte, next int, err error) {
	if pos >= len(data) || data[pos] != 0xff {
		return 0, 0, formatErr("expected a marker")
	}
	for pos < len(data) && data[pos] == 0xff {
		pos++
	}
	if pos >= len(data) {
		return 0, 0, formatErr("truncated before a marker")
	}
	return data[pos], pos + 1, nil
}

func standalone(m byte) bool { return m == mTEM || m >= mRST0 && m <= mRST0+7 }

// readConfig walks the markers up to the frame header.
func readConfig(data []byte) (w, h, comps int, err error) {
	if len(data) < 2 || data[0] != 0xff || data[1] != mSOI {
		return 0, 0, 0, errNoSOI
	}
	pos := 2
	for {
		m, next, err := nextMarker(data, pos)
		if err != nil {
			return 0, 0, 0, err
		}
		if standalone(m) || m == mSOI {
			pos = next
			continue
		}
		if m == mEOI || m == mSOS {
			return 0, 0, 0, formatErr("no frame header before image data")
		}
		seg, err := segment(data, next)
		if err != nil {
			return 0, 0, 0, err
		}
		if m >= 0xc0 && m <= 0xcf && m != mDHT && m != 0xc8 && m != 0xcc {
			if len(seg) < 6 {
				return 0, 0, 0, formatErr("short frame header")
			}
			h := int(seg[1])<<8 | int(seg[2])
			w := int(seg[3])<<8 | int(seg[4])
			n := int(seg[5])
			if w == 0 || h == 0 {
				return 0, 0, 0, formatErr("zero image size")
			}
			switch n {
			case 1:
				return w, h, 1, nil
			case 3, 4:
				return w, h, 3, nil
			}
			return 0, 0, 0, formatErr(fmt.Sprintf("%d components", n))
		}
		pos = next + 2 + len(seg)
	}
}

type component struct {
	id     uint8
	h, v   int // sampling factors
	tq     int // quantization table
	td, ta int // Huffman tables
	size   int // IDCT output size: 8/denom, or larger for subsampled chroma
	bw, bh int // blocks per line and column in the scan
	dw, dh int // real width and height of the scaled component
	upH    int // upsampling factors to the output (1 or 2)
	upV    int
	plane  []uint8
	stride int
	pred   int32
}

// goDecoder is the pure-Go baseline decoder; all its buffers are reused.
type goDecoder struct {
	width, height, ncomp int
	comp                 [4]component
	hmax, vmax           int
	qt                   [4][64]int32 // zig-zag order
	qtFast               [4][64]int32 // qt with the AAN scales of idct8Fast
	qtDefined            [4]bool
	dc, ac               [4]huffTable
	ri                   int
	jfif                 bool
	adobe                bool
	adobeTransform       uint8
	sof                  byte
	scan                 [4]int // components of the scan, in scan order
	nscan                int

	br      bitReader
	blk     [64]int32
	planes  []uint8
	rowCb   []uint8
	rowCr   []uint8
	fast    bool // replicate chroma instead of libjpeg's fancy upsampling
	fastDCT bool // full-size blocks with libjpeg's fast IDCT (jidctfst)
}

// errFallback says the JPEG is valid so far but outside the fast path.
var errFallback = errors.New("jpeg: not a baseline JPEG the fast path handles")

func (d *goDecoder) decode(dst transform.Image, data []byte, denom int) error {
	pos, err := d.parse(data)
	if err == errFallback {
		return decodeStd(dst, data, denom)
	}
	if err != nil {
		return err
	}
	if sw, sh := ScaledSize(d.width, d.height, denom); sw != dst.Width || sh != dst.Height {
		return fmt.Errorf("jpeg: decode: %dx%d image at 1/%d is %dx%d, destination is %dx%d", d.width, d.height, denom, sw, sh, dst.Width, dst.Height)
	}
	if !d.setup(denom) {
		return decodeStd(dst, data, denom)
	}
	if err := d.decodeScan(data, pos, dst.Channels == 1); err != nil {
		return err
	}
	d.output(dst)
	return nil
}

// parse reads the markers up to the first scan and returns the position of
// its entropy-coded data.
func (d *goDecoder) parse(data []byte) (int, error) {
	if len(data) < 2 || data[0] != 0xff || data[1] != mSOI {
		return 0, errNoSOI
	}
	d.qtDefined = [4]bool{}
	for i := range d.dc {
		d.dc[i].defined = false
		d.ac[i].defined = false
	}
	d.ri, d.jfif, d.adobe, d.sof, d.ncomp = 0, false, false, 0, 0
	pos := 2
	for {
		m, next, err := nextMarker(data, pos)
		if err != nil {
			return 0, err
		}
		if standalone(m) || m == mSOI {
			pos = next
			continue
		}
		if m == mEOI {
			return 0, formatErr("no image data")
		}
		seg, err := segment(data, next)
		if err != nil {
			return 0, err
		}
		pos = next + 2 + len(seg)
		switch {
		case m == mDQT:
			err = d.parseDQT(seg)
		case m == mDHT:
			err = d.parseDHT(seg)
		case m == mDRI:
			if len(seg) != 2 {
				return 0, formatErr("bad DRI segment")
			}
			d.ri = int(seg[0])<<8 | int(seg[1])
		case m == mSOF0 || m == mSOF1:
			err = d.parseSOF(m, seg)
		case m == mSOF2:
			return 0, errFallback
		case m >= 0xc3 && m <= 0xcf && m != 0xc8 && m != 0xcc:
			// Lossless, hierarchical or arithmetic-coded: image/jpeg
			// reports what it does not support.
			return 0, errFallback
		case m == mAPP0:
			if len(seg) >= 5 && string(seg[:5]) == "JFIF\x00" {
				d.jfif = true
			}
		case m == mAPPE:
			if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
				d.adobe = true
				d.adobeTransform = seg[11]
			}
		case m == mSOS:
			if d.sof == 0 {
				return 0, formatErr("scan before frame header")
			}
			if err := d.parseSOS(seg); err != nil {
				return 0, err
			}
			return pos, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

func (d *goDecoder) parseDQT(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, int(seg[0]&15)
		if tq > 3 || pq > 1 {
			return formatErr("bad quantization table")
		}
		n := 64 * (1 + int(pq))
		if len(seg) < 1+n {
			return formatErr("short quantization table")
		}
		for k := 0; k < 64; k++ {
			if pq == 0 {
				d.qt[tq][k] = int32(seg[1+k])
			} else {
				d.qt[tq][k] = int32(seg[1+2*k])<<8 | int32(seg[2+2*k])
			}
			d.qtFast[tq][k] = (d.qt[tq][k]*aanScale[zigzag[k]] + 1<<11) >> 12
		}
		d.qtDefined[tq] = true
		seg = seg[1+n:]
	}
	return nil
}

func (d *goDecoder) parseDHT(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return formatErr("short Huffman table")
		}
		tc, th := seg[0]>>4, int(seg[0]&15)
		if tc > 1 || th > 3 {
			return formatErr("bad Huffman table class or index")
		}
		var counts [16]uint8
		copy(counts[:], seg[1:17])
		total := 0
		for _, c := range counts {
			total += int(c)
		}
		if len(seg) < 17+total {
			return formatErr("short Huffman table")
		}
		t := &d.dc[th]
		if tc == 1 {
			t = &d.ac[th]
		}
		if err := t.build(&counts, seg[17:17+total], tc == 1); err != nil {
			return err
		}
		seg = seg[17+total:]
	}
	return nil
}

func (d *goDecoder) parseSOF(m byte, seg []byte) error {
	if d.sof != 0 {
		return formatErr("more than one frame header")
	}
	if len(seg) < 6 {
		return formatErr("short frame header")
	}
	if seg[0] != 8 {
		return errFallback // 12-bit precision
	}
	d.height = int(seg[1])<<8 | int(seg[2])
	d.width = int(seg[3])<<8 | int(seg[4])
	n := int(seg[5])
	if d.width == 0 || d.height == 0 {
		return formatErr("zero image size (DNL is not supported)")
	}
	if len(seg) != 6+3*n {
		return formatErr("frame header length does not match its components")
	}
	if n != 1 && n != 3 {
		return errFallback
	}
	d.ncomp = n
	d.hmax, d.vmax = 1, 1
	for i := 0; i < n; i++ {
		c := &d.comp[i]
		c.id = seg[6+3*i]
		c.h, c.v = int(seg[7+3*i]>>4), int(seg[7+3*i]&15)
		c.tq = int(seg[8+3*i])
		if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 || c.tq > 3 {
			return formatErr("bad component sampling factors or table")
		}
		for j := 0; j < i; j++ {
			if d.comp[j].id == c.id {
				return formatErr("duplicate component id")
			}
		}
		d.hmax, d.vmax = max(d.hmax, c.h), max(d.vmax, c.v)
	}
	if n == 1 {
		// A single-component scan is not interleaved: one block per MCU
		// whatever the declared factors.
		d.comp[0].h, d.comp[0].v, d.hmax, d.vmax = 1, 1, 1, 1
	}
	d.sof = m
	return nil
}

func (d *goDecoder) parseSOS(seg []byte) error {
	if len(seg) < 1 {
		return formatErr("short scan header")
	}
	ns := int(seg[0])
	if ns < 1 || ns > 4 || len(seg) != 4+2*ns {
		return formatErr("bad scan header length")
	}
	if ns != d.ncomp {
		return errFallback // non-interleaved multi-scan image
	}
	for i := 0; i < ns; i++ {
		id, tables := seg[1+2*i], seg[2+2*i]
		ci := -1
		for j := 0; j < d.ncomp; j++ {
			if d.comp[j].id == id {
				ci = j
			}
		}
		if ci < 0 {
			return formatErr("scan names an unknown component")
		}
		for j := 0; j < i; j++ {
			if d.scan[j] == ci {
				return formatErr("scan names a component twice")
			}
		}
		c := &d.comp[ci]
		c.td, c.ta = int(tables>>4), int(tables&15)
		if c.td > 3 || c.ta > 3 || !d.dc[c.td].defined || !d.ac[c.ta].defined {
			return formatErr("scan uses an undefined Huffman table")
		}
		if !d.qtDefined[c.tq] {
			return formatErr("component uses an undefined quantization table")
		}
		d.scan[i] = ci
	}
	d.nscan = ns
	ss, se, ahal := seg[1+2*ns], seg[2+2*ns], seg[3+2*ns]
	if ss != 0 || se != 63 || ahal != 0 {
		return formatErr("sequential scan with spectral selection or approximation")
	}
	return nil
}

// setup chooses each component's IDCT size and upsampling as
// libjpeg-turbo's jdmaster.c does (chroma is enlarged by the IDCT rather
// than upsampled where the scale allows) and sizes the planes. It returns
// false for layouts outside the fast path.
func (d *goDecoder) setup(denom int) bool {
	if d.ncomp == 3 {
		if d.jfif {
			// YCbCr.
		} else if d.adobe && d.adobeTransform == 0 {
			return false // RGB or unknown
		} else if !d.adobe && d.comp[0].id == 'R' && d.comp[1].id == 'G' && d.comp[2].id == 'B' {
			return false
		}
	}
	minSize := 8 / denom
	mcuW, mcuH := 8*d.hmax, 8*d.vmax
	mcusX := (d.width + mcuW - 1) / mcuW
	mcusY := (d.height + mcuH - 1) / mcuH
	total := 0
	for i := 0; i < d.ncomp; i++ {
		c := &d.comp[i]
		if d.hmax%c.h != 0 || d.vmax%c.v != 0 {
			return false
		}
		s := minSize
		for s < 8 && (d.hmax*minSize)%(c.h*s*2) == 0 && (d.vmax*minSize)%(c.v*s*2) == 0 {
			s *= 2
		}
		c.size = s
		c.upH = d.hmax * minSize / (c.h * s)
		c.upV = d.vmax * minSize / (c.v * s)
		if c.upH < 1 || c.upH > 2 || c.upV < 1 || c.upV > 2 || (i == 0 && (c.upH != 1 || c.upV != 1)) {
			return false
		}
		if d.ncomp == 1 {
			c.bw, c.bh = (d.width+7)/8, (d.height+7)/8
		} else {
			c.bw, c.bh = mcusX*c.h, mcusY*c.v
		}
		c.dw = (d.width*c.h*s + d.hmax*8 - 1) / (d.hmax * 8)
		c.dh = (d.height*c.v*s + d.vmax*8 - 1) / (d.vmax * 8)
		c.stride = c.bw * s
		total += c.stride * c.bh * s
	}
	if cap(d.planes) < total {
		d.planes = make([]uint8, total)
	}
	off := 0
	for i := 0; i < d.ncomp; i++ {
		c := &d.comp[i]
		n := c.stride * c.bh * c.size
		c.plane = d.planes[off : off+n : off+n]
		off += n
	}
	return true
}

// decodeScan decodes the entropy-coded data at pos into the planes. With
// lumaOnly the chroma blocks are decoded but not transformed.
func (d *goDecoder) decodeScan(data []byte, pos int, lumaOnly bool) error {
	br := &d.br
	br.reset(data, pos)
	for i := 0; i < d.ncomp; i++ {
		d.comp[i].pred = 0
	}
	var mcusX, mcusY int
	if d.ncomp == 1 {
		mcusX, mcusY = d.comp[0].bw, d.comp[0].bh
	} else {
		mcusX, mcusY = (d.width+8*d.hmax-1)/(8*d.hmax), (d.height+8*d.vmax-1)/(8*d.vmax)
	}
	nextRST := 0
	mcu := 0
	for my := 0; my < mcusY; my++ {
		for mx := 0; mx < mcusX; mx++ {
			if d.ri > 0 && mcu > 0 && mcu%d.ri == 0 {
				if err := d.restart(nextRST); err != nil {
					return err
				}
				nextRST = (nextRST + 1) & 7
			}
			mcu++
			for si := 0; si < d.nscan; si++ {
				ci := d.scan[si]
				c := &d.comp[ci]
				skip := lumaOnly && ci != 0
				for by := 0; by < c.v; by++ {
					for bx := 0; bx < c.h; bx++ {
						acs, err := d.decodeBlock(c)
						if err != nil {
							return err
						}
						if skip {
							d.clearBlock(acs)
							continue
						}
						row := (my*c.v + by) * c.size
						col := (mx*c.h + bx) * c.size
						out := c.plane[row*c.stride+col:]
						switch {
						case d.fastDCT && c.size == 8 && !acs:
							idctFastDC(d.blk[0], out, c.stride)
						case d.fastDCT && c.size == 8:
							idct8Fast(&d.blk, out, c.stride)
						case !acs:
							idctDC(d.blk[0], c.size, out, c.stride)
						case c.size == 8:
							idct8(&d.blk, out, c.stride)
						case c.size == 4:
							idct4(&d.blk, out, c.stride)
						case c.size == 2:
							idct2(&d.blk, out, c.stride)
						default:
							idct1(&d.blk, out, c.stride)
						}
						d.clearBlock(acs)
					}
				}
			}
		}
	}
	if br.overrun() {
		return errTruncated
	}
	return nil
}

func (d *goDecoder) clearBlock(acs bool) {
	if acs {
		d.blk = [64]int32{}
	} else {
		d.blk[0] = 0
	}
}

// restart checks and skips the RSTn marker expected after a restart
// interval, and resets the decoder's state.
func (d *goDecoder) restart(n int) error {
	br := &d.br
	if br.overrun() {
		return errTruncated
	}
	data := br.data
	p := br.pos
	// The reader stops at the marker; anything before it is corrupt data
	// that libjpeg would skip with a warning.
	for p+1 < len(data) && !(data[p] == 0xff && data[p+1] != 0 && data[p+1] != 0xff) {
		p++
	}
	if p+1 >= len(data) || data[p+1] != byte(mRST0+n) {
		return formatErr("missing restart marker")
	}
	br.reset(data, p+2)
	for i := 0; i < d.ncomp; i++ {
		d.comp[i].pred = 0
	}
	return nil
}

// decodeBlock decodes one block of c into d.blk, dequantized, in natural
// order. It reports whether any AC coefficient is non-zero. The bit
// buffer lives in locals while the block is decoded.
func (d *goDecoder) decodeBlock(c *component) (acs bool, err error) {
	br := &d.br
	q := &d.qt[c.tq&3]
	if d.fastDCT && c.size == 8 {
		q = &d.qtFast[c.tq&3]
	}
	blk := &d.blk
	acc, n := br.acc, br.n
	if n < 32 {
		br.fill()
		acc, n = br.acc, br.n
	}
	dc := &d.dc[c.td&3]
	var s uint
	if e := dc.lut[acc>>(64-lookBits)]; e != 0 {
		l := uint(e >> 8)
		acc <<= l
		n -= l
		s = uint(e & 0xff)
	} else {
		br.acc, br.n = acc, n
		v, err := br.decode(dc)
		if err != nil {
			return false, err
		}
		acc, n = br.acc, br.n
		s = uint(v)
	}
	if s > 11 {
		return false, formatErr("DC difference too large")
	}
	if s > 0 {
		v := int32(acc >> (64 - s))
		acc <<= s
		n -= s
		if v < 1<<(s-1) {
			v += -1<<s + 1
		}
		c.pred += v
	}
	blk[0] = c.pred * q[0]
	ac := &d.ac[c.ta&3]
	for k := uint(1); k < 64; {
		if n < 32 {
			br.acc, br.n = acc, n
			br.fill()
			acc, n = br.acc, br.n
		}
		peek := acc >> (64 - lookBits)
		if fa := ac.fastAC[peek]; fa != 0 {
			k += uint(fa>>4) & 15
			l := uint(fa & 15)
			acc <<= l
			n -= l
			if k > 63 {
				return false, formatErr("AC coefficient index out of range")
			}
			blk[zigzag[k]&63] = int32(fa>>8) * q[k]
			acs = true
			k++
			continue
		}
		var rs uint
		if e := ac.lut[peek]; e != 0 {
			l := uint(e >> 8)
			acc <<= l
			n -= l
			rs = uint(e & 0xff)
		} else {
			br.acc, br.n = acc, n
			v, err := br.decode(ac)
			if err != nil {
				return false, err
			}
			acc, n = br.acc, br.n
			rs = uint(v)
		}
		r, s := rs>>4, rs&15
		if s == 0 {
			if r != 15 {
				break // end of block
			}
			k += 16
			continue
		}
		k += r
		if k > 63 || s > 10 {
			return false, formatErr("AC coefficient out of range")
		}
		v := int32(acc >> (64 - s))
		acc <<= s
		n -= s
		if v < 1<<(s-1) {
			v += -1<<s + 1
		}
		blk[zigzag[k]&63] = v * q[k]
		acs = true
		k++
	}
	br.acc, br.n = acc, n
	return acs, nil
}

// output converts the planes into dst.
func (d *goDecoder) output(dst transform.Image) {
	w, h := dst.Width, dst.Height
	y := &d.comp[0]
	if d.ncomp == 1 || dst.Channels == 1 {
		for r := 0; r < h; r++ {
			src := y.plane[r*y.stride : r*y.stride+w]
			out := dst.Pix[r*dst.Stride:]
			if dst.Channels == 1 {
				copy(out[:w], src)
				continue
			}
			out = out[:3*w]
			for i, v := range src {
				out[3*i], out[3*i+1], out[3*i+2] = v, v, v
			}
		}
		return
	}
	n := 2 * max(d.comp[1].dw, d.comp[2].dw, w)
	if cap(d.rowCb) < n {
		d.rowCb = make([]uint8, n)
		d.rowCr = make([]uint8, n)
	}
	cb, cr := &d.comp[1], &d.comp[2]
	fused := !d.fast && cb.upH == 2 && cb.upV == 2 && cr.upH == 2 && cr.upV == 2 &&
		cb.size > 1 && cb.dw > 2 && cb.dw == cr.dw && cb.dh == cr.dh
	for r := 0; r < h; r++ {
		out := dst.Pix[r*dst.Stride : r*dst.Stride+3*w]
		yrow := y.plane[r*y.stride : r*y.stride+w]
		if fused {
			// 4:2:0 with libjpeg's fancy upsampling, fused with the
			// colour conversion.
			near, far := cb.fancyRows(r)
			yccRowH2V2Fancy(out, yrow,
				cb.plane[near:near+cb.dw], cb.plane[far:far+cb.dw],
				cr.plane[near:near+cr.dw], cr.plane[far:far+cr.dw])
			continue
		}
		cbRow := d.chromaRow(cb, r, d.rowCb[:n])
		crRow := d.chromaRow(cr, r, d.rowCr[:n])
		yccRow(out, yrow, cbRow[:w], crRow[:w])
	}
}

// fancyRows returns the offsets in c's plane of the near and far rows that
// vertical fancy upsampling combines for output row r.
func (c *component) fancyRows(r int) (near, far int) {
	cr := r / 2
	fr := cr + 1
	if r%2 == 0 {
		fr = cr - 1
	}
	fr = min(max(fr, 0), c.dh-1)
	return cr * c.stride, fr * c.stride
}

// chromaRow returns output row r of component c at output resolution,
// upsampled into tmp when needed.
func (d *goDecoder) chromaRow(c *component, r int, tmp []uint8) []uint8 {
	if c.upV == 1 {
		row := c.plane[r*c.stride : r*c.stride+c.dw]
		if c.upH == 1 {
			return row
		}
		if d.fast || c.size == 1 {
			upH2(tmp, row)
		} else {
			upH2Fancy(tmp, row)
		}
		return tmp
	}
	cr := r / 2
	near := c.plane[cr*c.stride : cr*c.stride+c.dw]
	if d.fast || c.size == 1 {
		if c.upH == 1 {
			return near
		}
		upH2(tmp, near)
		return tmp
	}
	upper := r%2 == 0
	fr := cr + 1
	if upper {
		fr = cr - 1
	}
	fr = min(max(fr, 0), c.dh-1)
	far := c.plane[fr*c.stride : fr*c.stride+c.dw]
	if c.upH == 1 {
		upV2Fancy(tmp, near, far, upper)
	} else {
		upH2V2Fancy(tmp, near, far)
	}
	return tmp
}
