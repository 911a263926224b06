package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header, in bytes, that Parse and Read accept:
// the reference implementation's limit of 100 MB.
const MaxHeaderSize = 100_000_000

// metadataKey is the header entry holding the string-to-string metadata.
const metadataKey = "__metadata__"

// Tensor is one array of a file: its element type, its shape (outermost axis
// first; empty for a scalar) and its elements in row-major order as
// little-endian bytes. len(Data) is the product of Shape times DType.Size().
type Tensor struct {
	DType DType
	Shape []int
	Data  []byte
}

// NumElements is the product of the extents (1 for a scalar).
func (t Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is the contents of a safetensors file.
type File struct {
	// Tensors maps each name to its tensor.
	Tensors map[string]Tensor
	// Metadata is the header's "__metadata__" map; nil when absent.
	Metadata map[string]string
}

// Names returns the tensor names in increasing byte order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// entry is a tensor of the header before its data is attached.
type entry struct {
	name       string
	dtype      DType
	shape      []int
	begin, end int64
}

// Parse decodes a safetensors file held in memory. The tensors' Data alias
// data. Malformed input, including any that the reference implementation
// refuses, gives an error and never a panic.
func Parse(data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("safetensors: file of %d bytes is shorter than the 8-byte header length", len(data))
	}
	n, err := headerLength(binary.LittleEndian.Uint64(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	entries, meta, err := parseHeader(data[8 : 8+n])
	if err != nil {
		return nil, err
	}
	region := data[8+n:]
	if err := checkLayout(entries, int64(len(region))); err != nil {
		return nil, err
	}
	return assemble(entries, meta, region), nil
}

// Read decodes a safetensors file of size bytes from r, validating the header
// before it reads (and allocates) the data.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 8 {
		return nil, fmt.Errorf("safetensors: file of %d bytes is shorter than the 8-byte header length", size)
	}
	var lb [8]byte
	if err := readFull(r, lb[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: read header length: %w", err)
	}
	n, err := headerLength(binary.LittleEndian.Uint64(lb[:]), size)
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, n)
	if err := readFull(r, hdr, 8); err != nil {
		return nil, fmt.Errorf("safetensors: read header: %w", err)
	}
	entries, meta, err := parseHeader(hdr)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(entries, size-8-n); err != nil {
		return nil, err
	}
	region := make([]byte, size-8-n)
	if err := readFull(r, region, 8+n); err != nil {
		return nil, fmt.Errorf("safetensors: read data: %w", err)
	}
	return assemble(entries, meta, region), nil
}

// Open reads the safetensors file at path.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := Read(fd, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return f, nil
}

func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// headerLength checks the header length n read from a file of size bytes.
func headerLength(n uint64, size int64) (int64, error) {
	if n > MaxHeaderSize {
		return 0, fmt.Errorf("safetensors: header length %d exceeds the limit of %d bytes", n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return 0, fmt.Errorf("safetensors: header length %d exceeds the %d bytes that follow it", n, size-8)
	}
	return int64(n), nil
}

// rawInfo is a tensor's header entry as JSON gives it. Pointers tell a
// missing (or null) field from a zero one.
type rawInfo struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// parseHeader decodes and checks the JSON header: one object whose keys are
// tensor names (and optionally "__metadata__"), each named once.
func parseHeader(h []byte) ([]entry, map[string]string, error) {
	if !utf8.Valid(h) {
		return nil, nil, errors.New("safetensors: header: not valid UTF-8")
	}
	if len(h) == 0 || h[0] != '{' {
		return nil, nil, errors.New("safetensors: header: does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(h))
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("safetensors: header: invalid JSON: %v", err)
	}
	var (
		entries []entry
		meta    map[string]string
		hasMeta bool
		seen    = map[string]bool{}
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: header: invalid JSON: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("safetensors: header: invalid JSON: key %v is not a string", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("safetensors: header: invalid JSON: %v", err)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("safetensors: header: key %q appears twice", name)
		}
		seen[name] = true
		if name == metadataKey {
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, fmt.Errorf("safetensors: header: %s: must map strings to strings: %v", metadataKey, err)
			}
			hasMeta = true
			continue
		}
		e, err := parseEntry(name, raw)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("safetensors: header: invalid JSON: %v", err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %v after the header object", tok)
		}
		return nil, nil, fmt.Errorf("safetensors: header: invalid JSON: %v", err)
	}
	if hasMeta && meta == nil {
		meta = map[string]string{}
	}
	return entries, meta, nil
}

// parseEntry checks one tensor's dtype, shape and the size of its byte range.
func parseEntry(name string, raw json.RawMessage) (entry, error) {
	fail := func(format string, args ...any) (entry, error) {
		return entry{}, fmt.Errorf("safetensors: header: tensor %q: %s", name, fmt.Sprintf(format, args...))
	}
	var ri rawInfo
	if err := json.Unmarshal(raw, &ri); err != nil {
		return fail("%v", err)
	}
	switch {
	case ri.DType == nil:
		return fail("missing dtype")
	case ri.Shape == nil:
		return fail("missing shape")
	case ri.DataOffsets == nil:
		return fail("missing data_offsets")
	}
	dt := DType(*ri.DType)
	if !dt.Valid() {
		return fail("unknown dtype %q", *ri.DType)
	}
	shape := make([]int, len(*ri.Shape))
	numel := int64(1)
	for i, d := range *ri.Shape {
		if d < 0 {
			return fail("negative extent %d in shape %v", d, *ri.Shape)
		}
		if d > 0 && numel > math.MaxInt64/d {
			return fail("shape %v has too many elements", *ri.Shape)
		}
		numel *= d
		shape[i] = int(d)
	}
	size := int64(dt.Size())
	if numel > math.MaxInt64/size {
		return fail("shape %v of %s has too many bytes", *ri.Shape, dt)
	}
	if numel > math.MaxInt {
		return fail("shape %v has too many elements", *ri.Shape)
	}
	offs := *ri.DataOffsets
	if len(offs) != 2 {
		return fail("data_offsets %v must be [begin, end]", offs)
	}
	b, e := offs[0], offs[1]
	if b < 0 || e < b {
		return fail("data_offsets [%d, %d] are not an ordered pair of non-negative offsets", b, e)
	}
	if e-b != numel*size {
		return fail("data_offsets [%d, %d] span %d bytes but %s%v needs %d", b, e, e-b, dt, shape, numel*size)
	}
	return entry{name: name, dtype: dt, shape: shape, begin: b, end: e}, nil
}

// checkLayout checks that the byte ranges tile [0, size) without gaps or
// overlaps, as the reference implementation requires. It sorts entries by
// offset.
func checkLayout(entries []entry, size int64) error {
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name))
	})
	var at int64
	var prev string
	for _, e := range entries {
		switch {
		case e.begin > at:
			return fmt.Errorf("safetensors: header: tensor %q: data_offsets [%d, %d] leave bytes [%d, %d) unused", e.name, e.begin, e.end, at, e.begin)
		case e.begin < at:
			return fmt.Errorf("safetensors: header: tensor %q: data_offsets [%d, %d] overlap tensor %q", e.name, e.begin, e.end, prev)
		}
		at, prev = e.end, e.name
	}
	if at != size {
		return fmt.Errorf("safetensors: header: tensors cover %d bytes but the data region has %d", at, size)
	}
	return nil
}

func assemble(entries []entry, meta map[string]string, region []byte) *File {
	f := &File{Tensors: make(map[string]Tensor, len(entries)), Metadata: meta}
	for _, e := range entries {
		f.Tensors[e.name] = Tensor{DType: e.dtype, Shape: e.shape, Data: region[e.begin:e.end:e.end]}
	}
	return f
}
