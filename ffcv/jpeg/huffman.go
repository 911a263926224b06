package jpeg

import "errors"

// lookBits is the width of the Huffman lookahead tables: codes of up to
// lookBits bits (nearly all of them in practice) decode with one table
// read.
const lookBits = 10

// huffTable is one canonical Huffman table (ITU T.81 Annex C) with
// lookahead tables.
type huffTable struct {
	// lut[peek] = len<<8 | symbol for codes of len ≤ lookBits, 0 otherwise.
	lut [1 << lookBits]uint16
	// fastAC[peek], for AC tables, decodes a whole (run, size, value)
	// triple when the code and its extra bits fit in lookBits:
	// value<<8 | run<<4 | total length; 0 when they do not fit.
	fastAC [1 << lookBits]int16
	// maxcode[l] is the largest code of length l (−1 if none), valptr[l]
	// the index in vals of the first code of length l minus that code.
	maxcode [18]int32
	valptr  [17]int32
	vals    [256]uint8
	defined bool
}

var (
	errHuffCode = errors.New("jpeg: decode: invalid Huffman code")
	errHuffDef  = errors.New("jpeg: decode: invalid Huffman table")
)

// build makes the table from the 16 code-length counts and the symbols of a
// DHT segment.
func (t *huffTable) build(counts *[16]uint8, vals []uint8, ac bool) error {
	total := 0
	for _, c := range counts {
		total += int(c)
	}
	if total == 0 || total > 256 || total != len(vals) {
		return errHuffDef
	}
	copy(t.vals[:], vals)
	clear(t.lut[:])
	clear(t.fastAC[:])
	code, k := int32(0), int32(0)
	for l := 1; l <= 16; l++ {
		n := int32(counts[l-1])
		t.valptr[l] = k - code
		if n == 0 {
			t.maxcode[l] = -1
		} else {
			// The codes of length l are code .. code+n−1; they must fit
			// in l bits (the all-ones code of each length is reserved,
			// but real encoders respect it and decoders accept it).
			if code+n > 1<<l {
				return errHuffDef
			}
			if l <= lookBits {
				for i := int32(0); i < n; i++ {
					c := code + i
					sym := uint16(vals[k+i])
					shift := lookBits - l
					for j := c << shift; j < (c+1)<<shift; j++ {
						t.lut[j] = uint16(l)<<8 | sym
					}
				}
			}
			t.maxcode[l] = code + n - 1
		}
		k += n
		code = (code + n) << 1
	}
	t.maxcode[17] = 0x7fffffff // sentinel: decoding stops at length 17 with an error
	if ac {
		for peek := range t.lut {
			e := t.lut[peek]
			if e == 0 {
				continue
			}
			l := int(e >> 8)
			rs := int(e & 0xff)
			run, size := rs>>4, rs&15
			if size == 0 || l+size > lookBits {
				continue
			}
			// The size extra bits follow the code.
			v := (peek >> (lookBits - l - size)) & (1<<size - 1)
			if v < 1<<(size-1) {
				v += -1<<size + 1
			}
			if v < -128 || v > 127 {
				continue
			}
			t.fastAC[peek] = int16(v<<8 | run<<4 | (l + size))
		}
	}
	t.defined = true
	return nil
}

// bitReader reads the entropy-coded segment MSB first, removing stuffed
// zero bytes. At a marker (or the end of the data) it supplies zero bits and
// counts them, so that decoding past the real data is detected afterwards.
type bitReader struct {
	data   []byte
	pos    int    // next byte of data to load
	acc    uint64 // bits, left-aligned
	n      uint   // number of valid bits in acc
	zeros  uint   // zero bits supplied after the data ran out
	marker bool   // reached a marker or the end of data
}

func (b *bitReader) reset(data []byte, pos int) {
	*b = bitReader{data: data, pos: pos}
}

// fill tops acc up to at least 57 bits.
func (b *bitReader) fill() {
	// Fast path: eight bytes none of which is 0xFF.
	if !b.marker && b.pos+8 <= len(b.data) {
		d := b.data[b.pos : b.pos+8 : b.pos+8]
		w := uint64(d[0])<<56 | uint64(d[1])<<48 | uint64(d[2])<<40 | uint64(d[3])<<32 |
			uint64(d[4])<<24 | uint64(d[5])<<16 | uint64(d[6])<<8 | uint64(d[7])
		// (x − 0x01…) & ^x & 0x80… is non-zero iff x has a zero byte; x = ^w
		// has a zero byte iff w has an 0xFF byte.
		x := ^w
		if (x-0x0101010101010101)&^x&0x8080808080808080 == 0 {
			k := (64 - b.n) >> 3 // whole bytes that fit
			// Load them, leaving the bits below them zero.
			b.acc |= w >> b.n &^ (1<<(64-b.n-8*k) - 1)
			b.pos += int(k)
			b.n += 8 * k
			return
		}
	}
	for b.n <= 56 {
		if b.marker || b.pos >= len(b.data) {
			b.marker = true
			b.zeros += 8
			b.n += 8
			continue
		}
		c := b.data[b.pos]
		if c == 0xff {
			if b.pos+1 >= len(b.data) || b.data[b.pos+1] != 0 {
				b.marker = true
				continue
			}
			b.pos += 2
		} else {
			b.pos++
		}
		b.acc |= uint64(c) << (56 - b.n)
		b.n += 8
	}
}

// overrun reports whether more bits were consumed than the data held.
func (b *bitReader) overrun() bool { return b.zeros > b.n }

// decode reads one Huffman symbol. The caller ensures n ≥ 16.
func (b *bitReader) decode(t *huffTable) (uint8, error) {
	e := t.lut[b.acc>>(64-lookBits)]
	if e != 0 {
		l := uint(e >> 8)
		b.acc <<= l
		b.n -= l
		return uint8(e), nil
	}
	code := int32(b.acc >> (64 - lookBits - 1))
	l := lookBits + 1
	for code > t.maxcode[l] {
		l++
		code = int32(b.acc >> (64 - l))
	}
	if l > 16 {
		return 0, errHuffCode
	}
	b.acc <<= uint(l)
	b.n -= uint(l)
	return t.vals[(t.valptr[l]+code)&0xff], nil
}
