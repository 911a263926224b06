package beton

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Version is the file format version this package reads and writes.
const Version = 2

// Sizes of the fixed parts of a file.
const (
	HeaderSize     = 24   // u16 version, u16 num_fields, u32 page_size, u64 num_samples, u64 alloc_table_ptr
	DescriptorSize = 1041 // u8 type id, u8[16] name, u8[1024] arguments
	NameSize       = 16
	ArgsSize       = 1024
	AllocEntrySize = 24 // u64 sample id, u64 pointer, u64 size
)

// Page sizes: FFCV's writer accepts powers of two in [MinPageSize, MaxPageSize].
const (
	MinPageSize     = 1 << 21
	MaxPageSize     = 1 << 31
	DefaultPageSize = 1 << 23
)

// FieldType is the type id of a field descriptor.
type FieldType uint8

// The field types of FFCV. TorchTensorType is stored like NDArrayType;
// CustomType fields (FFCV's user-defined fields) have no known metadata
// layout and cannot be read.
const (
	FloatType       FieldType = 0
	IntType         FieldType = 1
	RGBImageType    FieldType = 2
	BytesType       FieldType = 3
	NDArrayType     FieldType = 4
	JSONType        FieldType = 5
	TorchTensorType FieldType = 6
	CustomType      FieldType = 255
)

func (t FieldType) String() string {
	switch t {
	case FloatType:
		return "float"
	case IntType:
		return "int"
	case RGBImageType:
		return "rgb_image"
	case BytesType:
		return "bytes"
	case NDArrayType:
		return "ndarray"
	case JSONType:
		return "json"
	case TorchTensorType:
		return "torch_tensor"
	case CustomType:
		return "custom"
	}
	return "FieldType(" + strconv.Itoa(int(t)) + ")"
}

// metaSize and metaAlign give a field's part of a metadata row. The image
// and bytes structs are numpy struct dtypes built without align=True, so
// their alignment is 1; the scalars align to 8.
func (t FieldType) metaSize() int {
	switch t {
	case RGBImageType:
		return 13
	case BytesType, JSONType:
		return 16
	}
	return 8
}

func (t FieldType) metaAlign() int {
	switch t {
	case RGBImageType, BytesType, JSONType:
		return 1
	}
	return 8
}

// FieldInfo describes one field of a file.
type FieldInfo struct {
	Name string
	Type FieldType
	// DType is the numpy type string of an ndarray (or torch tensor)
	// element, as FFCV records it ("<f4", "|u1", ...).
	DType string
	// Shape is the shape of an ndarray (or torch tensor) field.
	Shape []int
	// Channels is 3 for RGB images, or 1 for grayscale images (a flock
	// extension recorded in the descriptor's arguments, which FFCV ignores).
	Channels int

	offset   int // byte offset within a metadata row
	arrayLen int // ndarray: bytes per sample
}

// ArrayBytes returns the size in bytes of one sample of an ndarray or torch
// tensor field (itemsize · Π Shape), or 0 for other fields.
func (f FieldInfo) ArrayBytes() int { return f.arrayLen }

// layoutRow assigns each field its offset in a metadata row by numpy's
// aligned-struct rules and returns the row size: fields are placed in order,
// each at the next multiple of its alignment, and the row is padded to a
// multiple of the largest alignment.
func layoutRow(fields []FieldInfo) int {
	off, maxAlign := 0, 1
	for i := range fields {
		a := fields[i].Type.metaAlign()
		off = (off + a - 1) / a * a
		fields[i].offset = off
		off += fields[i].Type.metaSize()
		maxAlign = max(maxAlign, a)
	}
	return (off + maxAlign - 1) / maxAlign * maxAlign
}

// header is the first HeaderSize bytes of a file.
type header struct {
	version    uint16
	numFields  uint16
	pageSize   uint32
	numSamples uint64
	allocPtr   uint64
}

func parseHeader(b []byte) header {
	le := binary.LittleEndian
	return header{le.Uint16(b), le.Uint16(b[2:]), le.Uint32(b[4:]), le.Uint64(b[8:]), le.Uint64(b[16:])}
}

func (h header) appendTo(b []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint16(b, h.version)
	b = le.AppendUint16(b, h.numFields)
	b = le.AppendUint32(b, h.pageSize)
	b = le.AppendUint64(b, h.numSamples)
	return le.AppendUint64(b, h.allocPtr)
}

// ndarray arguments: u64 shape[32] (unused dimensions 0), u64 length of the
// dtype description, then the description: numpy's dtype.descr as JSON,
// e.g. [["", "<f4"]].
const (
	maxDims      = 32
	ndTypeLenOff = maxDims * 8
	ndTypeOff    = ndTypeLenOff + 8
)

// maxArrayBytes bounds the per-sample size of an ndarray field.
const maxArrayBytes = 1 << 40

// parseNDArrayArgs decodes the dtype and shape of an ndarray descriptor.
func parseNDArrayArgs(args []byte) (dtype string, shape []int, itemSize, total int, err error) {
	le := binary.LittleEndian
	var dims [maxDims]uint64
	n := 0
	for i := range dims {
		dims[i] = le.Uint64(args[8*i:])
		if dims[i] != 0 {
			n = i + 1
		}
	}
	tl := le.Uint64(args[ndTypeLenOff:])
	if tl == 0 || tl > ArgsSize-ndTypeOff {
		return "", nil, 0, 0, fmt.Errorf("dtype description length %d outside [1, %d]", tl, ArgsSize-ndTypeOff)
	}
	var descr [][]any
	desc := args[ndTypeOff : ndTypeOff+int(tl)]
	if err := json.Unmarshal(desc, &descr); err != nil {
		return "", nil, 0, 0, fmt.Errorf("dtype description %q: %v", desc, err)
	}
	if len(descr) != 1 || len(descr[0]) != 2 {
		return "", nil, 0, 0, fmt.Errorf("dtype description %q: want one unnamed plain type", desc)
	}
	dtype, ok := descr[0][1].(string)
	if !ok {
		return "", nil, 0, 0, fmt.Errorf("dtype description %q: want one unnamed plain type", desc)
	}
	itemSize, err = dtypeItemSize(dtype)
	if err != nil {
		return "", nil, 0, 0, err
	}
	// FFCV drops trailing zero extents; a descriptor with none is a scalar.
	shape = make([]int, n)
	total = itemSize
	for i := range n {
		if dims[i] > maxArrayBytes || (dims[i] != 0 && uint64(total) > maxArrayBytes/dims[i]) {
			return "", nil, 0, 0, fmt.Errorf("shape %v: more than %d bytes per sample", dims[:n], int64(maxArrayBytes))
		}
		shape[i] = int(dims[i])
		total *= shape[i]
	}
	return dtype, shape, itemSize, total, nil
}

// ndarrayArgs encodes dtype and shape as FFCV's NDArrayField does.
func ndarrayArgs(dtype string, shape []int) ([ArgsSize]byte, error) {
	var args [ArgsSize]byte
	if len(shape) > maxDims {
		return args, fmt.Errorf("%d dimensions, at most %d", len(shape), maxDims)
	}
	le := binary.LittleEndian
	for i, d := range shape {
		le.PutUint64(args[8*i:], uint64(d))
	}
	// json.dumps(dtype.descr) in Python: [["", "<f4"]].
	desc := `[["", "` + dtype + `"]]`
	if len(desc) > ArgsSize-ndTypeOff {
		return args, fmt.Errorf("dtype %q too long", dtype)
	}
	le.PutUint64(args[ndTypeLenOff:], uint64(len(desc)))
	copy(args[ndTypeOff:], desc)
	return args, nil
}

// dtypeItemSize returns the element size of a numpy type string: a byte
// order character (<, >, | or =), a kind character, the size in bytes (in
// characters for U, 4 bytes each), and for datetimes an optional [unit].
func dtypeItemSize(dtype string) (int, error) {
	bad := fmt.Errorf("dtype %q: not a numpy type string", dtype)
	if len(dtype) < 3 || bytes.IndexByte([]byte("<>|="), dtype[0]) < 0 ||
		bytes.IndexByte([]byte("biufcmMOSUV"), dtype[1]) < 0 {
		return 0, bad
	}
	digits := dtype[2:]
	if (dtype[1] == 'm' || dtype[1] == 'M') && digits[len(digits)-1] == ']' {
		j := bytes.IndexByte([]byte(digits), '[')
		if j < 0 {
			return 0, bad
		}
		digits = digits[:j]
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 || n > 1<<20 || digits[0] == '+' {
		return 0, bad
	}
	if dtype[1] == 'U' {
		n *= 4
	}
	return n, nil
}

// dtypeNames maps numpy type names to their type strings.
var dtypeNames = map[string]string{
	"bool": "|b1", "uint8": "|u1", "int8": "|i1",
	"uint16": "<u2", "int16": "<i2", "float16": "<f2",
	"uint32": "<u4", "int32": "<i4", "float32": "<f4",
	"uint64": "<u8", "int64": "<i8", "float64": "<f8",
	"complex64": "<c8", "complex128": "<c16",
}

// canonicalDType maps a numpy type name or type string to the type string
// numpy's dtype.descr reports on a little-endian machine.
func canonicalDType(s string) (string, error) {
	if d, ok := dtypeNames[s]; ok {
		return d, nil
	}
	n, err := dtypeItemSize(s)
	if err != nil {
		return "", err
	}
	if s[1] == 'O' {
		return "", fmt.Errorf("dtype %q: object arrays cannot be stored", s)
	}
	// numpy reports byte-order-free types with '|' and native ones with '<'.
	order := s[0]
	switch {
	case s[1] == 'S' || s[1] == 'V' || n == 1 && s[1] != 'U':
		order = '|'
	case order == '=' || order == '|':
		order = '<'
	}
	return string(order) + s[1:], nil
}

// imageArgs records the channel count of a grayscale image field; RGB fields
// keep FFCV's all-zero arguments.
func imageArgs(channels int) [ArgsSize]byte {
	var args [ArgsSize]byte
	if channels == 1 {
		copy(args[:], `{"channels":1}`)
	}
	return args
}

// parseImageArgs returns the channel count recorded by imageArgs: arguments
// that do not start with a JSON object (FFCV writes zeros) mean 3.
func parseImageArgs(args []byte) (int, error) {
	if args[0] != '{' {
		return 3, nil
	}
	end := bytes.IndexByte(args, 0)
	if end < 0 {
		end = len(args)
	}
	var v struct {
		Channels int `json:"channels"`
	}
	if err := json.Unmarshal(args[:end], &v); err != nil {
		return 0, fmt.Errorf("image arguments %q: %v", args[:end], err)
	}
	switch v.Channels {
	case 0, 3:
		return 3, nil
	case 1:
		return 1, nil
	}
	return 0, fmt.Errorf("image arguments: %d channels, want 1 or 3", v.Channels)
}

var errNoFields = errors.New("no fields")
