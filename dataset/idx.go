package dataset

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// IDXType is the element type code of an IDX file (the third byte of its
// magic number).
type IDXType byte

// The element types of the IDX format.
const (
	IDXUint8   IDXType = 0x08
	IDXInt8    IDXType = 0x09
	IDXInt16   IDXType = 0x0B
	IDXInt32   IDXType = 0x0C
	IDXFloat32 IDXType = 0x0D
	IDXFloat64 IDXType = 0x0E
)

// Size returns the size in bytes of one element, or 0 for an unknown code.
func (t IDXType) Size() int {
	switch t {
	case IDXUint8, IDXInt8:
		return 1
	case IDXInt16:
		return 2
	case IDXInt32, IDXFloat32:
		return 4
	case IDXFloat64:
		return 8
	}
	return 0
}

func (t IDXType) String() string {
	switch t {
	case IDXUint8:
		return "uint8"
	case IDXInt8:
		return "int8"
	case IDXInt16:
		return "int16"
	case IDXInt32:
		return "int32"
	case IDXFloat32:
		return "float32"
	case IDXFloat64:
		return "float64"
	}
	return fmt.Sprintf("IDXType(%#02x)", byte(t))
}

// MaxIDXBytes bounds the payload of an IDX file that ReadIDX accepts.
const MaxIDXBytes = 1 << 32

// IDX is an array in the IDX format of the MNIST distribution: a magic
// number 0x00 0x00 type ndims, then ndims big-endian uint32 dimensions, then
// Π dims elements of the given type, big-endian, in row-major order, and
// nothing after them.
type IDX struct {
	Type IDXType
	Dims []int
	// Data holds the elements exactly as stored: big-endian, row-major,
	// len(Data) = Π Dims · Type.Size().
	Data []byte
}

// NumElements returns Π Dims.
func (x *IDX) NumElements() int {
	n := 1
	for _, d := range x.Dims {
		n *= d
	}
	return n
}

// ReadIDX decodes one IDX array from r, which may be gzip-compressed (told by
// the gzip magic bytes 1f 8b). It reads r to its end: trailing bytes, a short
// payload, an unknown type code, a dimension product above MaxIDXBytes or a
// corrupt gzip stream are errors.
func ReadIDX(r io.Reader) (*IDX, error) { return readIDX(r, -1) }

// readIDX is ReadIDX with hint, the number of decoded bytes (header and
// payload) that r is believed to hold, or -1. A hint that covers the payload
// lets the payload be allocated once; it never changes what is accepted.
func readIDX(r io.Reader, hint int64) (*IDX, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, err := br.Peek(2)
	if err != nil && len(magic) < 2 {
		return nil, fmt.Errorf("dataset: idx: header: %w", eofAsUnexpected(err))
	}
	var src io.Reader = br
	if magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("dataset: idx: gzip: %w", eofAsUnexpected(err))
		}
		defer zr.Close()
		src = zr
	}
	x, err := decodeIDX(src, hint)
	if err != nil {
		return nil, fmt.Errorf("dataset: idx: %w", err)
	}
	return x, nil
}

func decodeIDX(r io.Reader, hint int64) (*IDX, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("header: %w", eofAsUnexpected(err))
	}
	if head[0] != 0 || head[1] != 0 {
		return nil, fmt.Errorf("bad magic number % x: want 00 00 <type> <ndims>", head)
	}
	typ := IDXType(head[2])
	if typ.Size() == 0 {
		return nil, fmt.Errorf("unknown element type %#02x", head[2])
	}
	nd := int(head[3])
	if nd == 0 {
		return nil, errors.New("no dimensions")
	}
	raw := make([]byte, 4*nd)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf("dimensions: %w", eofAsUnexpected(err))
	}
	dims := make([]int, nd)
	size := int64(typ.Size())
	for i := range dims {
		d := int64(binary.BigEndian.Uint32(raw[4*i:]))
		dims[i] = int(d)
		if d != 0 && size > MaxIDXBytes/d {
			return nil, fmt.Errorf("dimensions %v…: more than %d bytes", dims[:i+1], int64(MaxIDXBytes))
		}
		size *= d
	}
	if hint >= 0 {
		hint -= int64(4 + 4*nd)
	}
	data, err := readPayload(r, size, hint)
	if err != nil {
		return nil, fmt.Errorf("%s %v payload: %w", typ, dims, err)
	}
	return &IDX{Type: typ, Dims: dims, Data: data}, nil
}

// readPayload reads exactly n bytes and then requires r to end. Without a
// hint covering n it grows the buffer as bytes arrive, so that a header
// claiming a huge array costs only what the stream really holds.
func readPayload(r io.Reader, n, hint int64) ([]byte, error) {
	c := n
	if hint < n {
		c = min(n, 1<<20)
	}
	buf := make([]byte, 0, c)
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), n-int64(len(buf)))))
		}
		m, err := r.Read(buf[len(buf):int(min(int64(cap(buf)), n))])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("after %d of %d bytes: %w", len(buf), n, err)
		}
	}
	if int64(len(buf)) < n {
		return nil, fmt.Errorf("truncated: %d of %d bytes: %w", len(buf), n, io.ErrUnexpectedEOF)
	}
	var one [1]byte
	switch k, err := io.ReadFull(r, one[:]); {
	case k > 0:
		return nil, fmt.Errorf("trailing bytes after %d-byte payload", n)
	case err != io.EOF:
		return nil, fmt.Errorf("after %d of %d bytes: %w", n, n, err)
	}
	return buf, nil
}

func eofAsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteIDX encodes x, uncompressed, in the format ReadIDX reads.
func WriteIDX(w io.Writer, x *IDX) error {
	if x.Type.Size() == 0 {
		return fmt.Errorf("dataset: write idx: unknown element type %#02x", byte(x.Type))
	}
	if len(x.Dims) == 0 || len(x.Dims) > 255 {
		return fmt.Errorf("dataset: write idx: %d dimensions: want 1 to 255", len(x.Dims))
	}
	for _, d := range x.Dims {
		if d < 0 || int64(d) > 1<<32-1 {
			return fmt.Errorf("dataset: write idx: dimension %d out of range", d)
		}
	}
	if want := x.NumElements() * x.Type.Size(); len(x.Data) != want {
		return fmt.Errorf("dataset: write idx: %d data bytes for %s %v: want %d", len(x.Data), x.Type, x.Dims, want)
	}
	head := make([]byte, 4+4*len(x.Dims))
	head[2], head[3] = byte(x.Type), byte(len(x.Dims))
	for i, d := range x.Dims {
		binary.BigEndian.PutUint32(head[4+4*i:], uint32(d))
	}
	if _, err := w.Write(head); err != nil {
		return fmt.Errorf("dataset: write idx: %w", err)
	}
	if _, err := w.Write(x.Data); err != nil {
		return fmt.Errorf("dataset: write idx: %w", err)
	}
	return nil
}
