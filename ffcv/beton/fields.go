package beton

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/ffcv/transform"
)

// Field says how Write stores one field. It is implemented by FloatField,
// IntField, RGBImageField, BytesField, NDArrayField and JSONField.
type Field interface {
	// Type returns the field's type id.
	Type() FieldType
	args() ([ArgsSize]byte, error)
	// encode fills the field's part of a metadata row (leaving the data
	// pointer to the packer) and returns the data to store, if any.
	encode(w *worker, sample int, v any, meta []byte) ([]byte, error)
}

// NamedField is a field with its name: at most 16 ASCII bytes, unique
// within a file.
type NamedField struct {
	Name  string
	Field Field
}

// FloatField stores a float64 per sample. Sample values: float64 or
// float32.
type FloatField struct{}

// IntField stores an int64 per sample. Sample values: any Go integer type
// whose value fits in an int64.
type IntField struct{}

// BytesField stores a variable-length byte string per sample. Sample
// values: []byte.
type BytesField struct{}

// JSONField stores a JSON document per sample, as FFCV does: the text
// followed by a NUL byte. Sample values: JSON text as json.RawMessage or
// []byte (stored as is, after checking that it is valid), or any other
// value, encoded with encoding/json and spaced as Python's json.dumps does
// (", " and ": ", non-ASCII characters escaped as \uXXXX), so that objects
// of strings, integers, booleans and null come out byte for byte as FFCV
// writes them. Floats are written in Go's shortest form (1 rather than
// Python's 1.0) and map keys are sorted.
type JSONField struct{}

// NDArrayField stores a fixed-shape array per sample, as raw little-endian
// elements in C order. DType is a numpy type string ("<f4", "|u1") or name
// ("float32", "uint8"); Shape has at least one dimension, all positive.
// Sample values: []byte holding exactly the array's bytes, or a slice of
// the matching Go type ([]float32 for <f4, []float64, []int64, []int32,
// []int16, []uint16, []int8, []uint8) of Π Shape elements.
type NDArrayField struct {
	DType string
	Shape []int
}

// ImageMode chooses how RGBImageField stores each image.
type ImageMode int

// The write modes of FFCV's RGBImageField.
const (
	// WriteRaw stores the pixels.
	WriteRaw ImageMode = iota
	// WriteJPEG stores a JPEG at JPEGQuality.
	WriteJPEG
	// WriteSmart stores a JPEG when the raw pixels would take more than
	// SmartThreshold bytes, the pixels otherwise (always the pixels when
	// SmartThreshold is 0).
	WriteSmart
	// WriteProportion stores a JPEG with probability CompressProbability,
	// the pixels otherwise.
	WriteProportion
)

func (m ImageMode) String() string {
	switch m {
	case WriteRaw:
		return "raw"
	case WriteJPEG:
		return "jpg"
	case WriteSmart:
		return "smart"
	case WriteProportion:
		return "proportion"
	}
	return "ImageMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseImageMode reads a mode by its name (FFCV's write_mode): raw, jpg
// (or jpeg), smart or proportion.
func ParseImageMode(s string) (ImageMode, error) {
	switch s {
	case "raw":
		return WriteRaw, nil
	case "jpg", "jpeg":
		return WriteJPEG, nil
	case "smart":
		return WriteSmart, nil
	case "proportion":
		return WriteProportion, nil
	}
	return 0, fmt.Errorf("write mode %q: want raw, jpg, smart or proportion", s)
}

// RGBImageField stores an image per sample, as FFCV's RGBImageField.
// Sample values: a transform.Image with Channels pixels channels, or an
// EncodedJPEG.
//
// Images whose longer side exceeds MaxResolution (when set) are first
// shrunk, keeping the aspect ratio, to sides ⌊side·MaxResolution/longer⌋
// with area interpolation (OpenCV's INTER_AREA, as FFCV). In
// WriteProportion mode the choice of each image is drawn from a
// counter-based generator keyed by (WriterOptions.Seed, sample, field), so
// the output does not depend on scheduling.
type RGBImageField struct {
	Mode          ImageMode
	MaxResolution int // 0: keep the size
	// JPEGQuality is the JPEG quality, 1–100 (0 means FFCV's default, 90).
	JPEGQuality int
	// CompressProbability is the probability of JPEG in WriteProportion
	// mode (FFCV's default is 0.5).
	CompressProbability float64
	// SmartThreshold is the raw size in bytes above which WriteSmart
	// stores a JPEG.
	SmartThreshold int
	// Channels is 3 (or 0) for RGB, or 1 for grayscale: a flock extension,
	// recorded in the field's descriptor arguments (which FFCV ignores;
	// RGB fields keep FFCV's all-zero arguments).
	Channels int
}

// EncodedJPEG is a JPEG file given as an RGBImageField sample value. It is
// stored unchanged when the field's choice for the sample is JPEG, no
// resizing is needed and its component count matches the field's channels;
// otherwise it is decoded (with the pure-Go decoder, so the output does not
// depend on the machine) and stored like a transform.Image.
type EncodedJPEG []byte

func (FloatField) Type() FieldType    { return FloatType }
func (IntField) Type() FieldType      { return IntType }
func (BytesField) Type() FieldType    { return BytesType }
func (JSONField) Type() FieldType     { return JSONType }
func (NDArrayField) Type() FieldType  { return NDArrayType }
func (RGBImageField) Type() FieldType { return RGBImageType }

func (FloatField) args() ([ArgsSize]byte, error) { return [ArgsSize]byte{}, nil }
func (IntField) args() ([ArgsSize]byte, error)   { return [ArgsSize]byte{}, nil }
func (BytesField) args() ([ArgsSize]byte, error) { return [ArgsSize]byte{}, nil }
func (JSONField) args() ([ArgsSize]byte, error)  { return [ArgsSize]byte{}, nil }

func (f NDArrayField) args() ([ArgsSize]byte, error) {
	dtype, _, _, err := f.resolve()
	if err != nil {
		return [ArgsSize]byte{}, err
	}
	return ndarrayArgs(dtype, f.Shape)
}

// resolve returns the canonical dtype, element size and bytes per sample.
func (f NDArrayField) resolve() (dtype string, itemSize, total int, err error) {
	if dtype, err = canonicalDType(f.DType); err != nil {
		return "", 0, 0, err
	}
	if itemSize, err = dtypeItemSize(dtype); err != nil {
		return "", 0, 0, err
	}
	if len(f.Shape) == 0 {
		return "", 0, 0, fmt.Errorf("empty shape: FFCV cannot read 0-dimensional arrays (use shape [1])")
	}
	if len(f.Shape) > maxDims {
		return "", 0, 0, fmt.Errorf("shape %v: more than %d dimensions", f.Shape, maxDims)
	}
	total = itemSize
	for _, d := range f.Shape {
		if d <= 0 {
			return "", 0, 0, fmt.Errorf("shape %v: extents must be positive", f.Shape)
		}
		if total > maxArrayBytes/d {
			return "", 0, 0, fmt.Errorf("shape %v: too large", f.Shape)
		}
		total *= d
	}
	return dtype, itemSize, total, nil
}

func (f RGBImageField) args() ([ArgsSize]byte, error) {
	if _, err := f.channels(); err != nil {
		return [ArgsSize]byte{}, err
	}
	switch {
	case f.Mode < WriteRaw || f.Mode > WriteProportion:
		return [ArgsSize]byte{}, fmt.Errorf("unknown write mode %d", int(f.Mode))
	case f.MaxResolution < 0:
		return [ArgsSize]byte{}, fmt.Errorf("negative max resolution %d", f.MaxResolution)
	case f.JPEGQuality < 0 || f.JPEGQuality > 100:
		return [ArgsSize]byte{}, fmt.Errorf("JPEG quality %d not in 1..100", f.JPEGQuality)
	case !(f.CompressProbability >= 0 && f.CompressProbability <= 1):
		return [ArgsSize]byte{}, fmt.Errorf("compress probability %v not in [0, 1]", f.CompressProbability)
	case f.SmartThreshold < 0:
		return [ArgsSize]byte{}, fmt.Errorf("negative smart threshold %d", f.SmartThreshold)
	}
	c, _ := f.channels()
	return imageArgs(c), nil
}

func (f RGBImageField) channels() (int, error) {
	switch f.Channels {
	case 0, 3:
		return 3, nil
	case 1:
		return 1, nil
	}
	return 0, fmt.Errorf("%d channels, want 3 (RGB) or 1 (grayscale)", f.Channels)
}

func (FloatField) encode(_ *worker, _ int, v any, meta []byte) ([]byte, error) {
	var x float64
	switch v := v.(type) {
	case float64:
		x = v
	case float32:
		x = float64(v)
	default:
		return nil, fmt.Errorf("value of type %T, want float64", v)
	}
	binary.LittleEndian.PutUint64(meta, math.Float64bits(x))
	return nil, nil
}

func (IntField) encode(_ *worker, _ int, v any, meta []byte) ([]byte, error) {
	var x int64
	switch v := v.(type) {
	case int64:
		x = v
	case int:
		x = int64(v)
	case int32:
		x = int64(v)
	case int16:
		x = int64(v)
	case int8:
		x = int64(v)
	case uint8:
		x = int64(v)
	case uint16:
		x = int64(v)
	case uint32:
		x = int64(v)
	case uint:
		if uint64(v) > math.MaxInt64 {
			return nil, fmt.Errorf("value %d does not fit in an int64", v)
		}
		x = int64(v)
	case uint64:
		if v > math.MaxInt64 {
			return nil, fmt.Errorf("value %d does not fit in an int64", v)
		}
		x = int64(v)
	default:
		return nil, fmt.Errorf("value of type %T, want int64", v)
	}
	binary.LittleEndian.PutUint64(meta, uint64(x))
	return nil, nil
}

func (BytesField) encode(_ *worker, _ int, v any, meta []byte) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("value of type %T, want []byte", v)
	}
	binary.LittleEndian.PutUint64(meta[8:], uint64(len(b)))
	return b, nil
}

func (JSONField) encode(_ *worker, _ int, v any, meta []byte) ([]byte, error) {
	var text []byte
	raw, ok := v.(json.RawMessage)
	if b, isBytes := v.([]byte); isBytes {
		raw, ok = b, true
	}
	if ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("JSON text %.40q is not valid", raw)
		}
		text = append(append(make([]byte, 0, len(raw)+1), raw...), 0)
	} else {
		var err error
		if text, err = pythonJSON(v); err != nil {
			return nil, err
		}
		text = append(text, 0)
	}
	binary.LittleEndian.PutUint64(meta[8:], uint64(len(text)))
	return text, nil
}

// pythonJSON encodes v as Python's json.dumps with its default settings.
func pythonJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	compact := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	out := make([]byte, 0, len(compact)+len(compact)/4)
	inString, escaped := false, false
	for i := 0; i < len(compact); {
		c := compact[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(compact[i:])
			if r1, r2 := utf16Pair(r); r2 != 0 {
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
			i += n
			continue
		}
		if inString && c == 0x7f {
			// Python escapes DEL too; Go leaves it.
			out = append(out, `\u007f`...)
			i++
			continue
		}
		out = append(out, c)
		i++
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			out = append(out, ' ')
		}
	}
	return out, nil
}

// utf16Pair returns the surrogate pair of r, or r and 0 within the BMP.
func utf16Pair(r rune) (rune, rune) {
	if r < 0x10000 {
		return r, 0
	}
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

func (f NDArrayField) encode(w *worker, _ int, v any, meta []byte) ([]byte, error) {
	dtype, itemSize, total, err := f.resolve()
	if err != nil {
		return nil, err
	}
	n := total / itemSize
	kind := dtype[1:]
	le := dtype[0] != '>'
	typed := func(goType string, want ...string) error {
		for _, k := range want {
			if kind == k && le {
				return nil
			}
		}
		return fmt.Errorf("%s value for a %s array", goType, dtype)
	}
	count := func(got int) error {
		if got != n {
			return fmt.Errorf("%d elements, want %d for shape %v", got, n, f.Shape)
		}
		return nil
	}
	var out []byte
	switch v := v.(type) {
	case []byte:
		if len(v) != total {
			return nil, fmt.Errorf("%d bytes, want %d for %s%v", len(v), total, dtype, f.Shape)
		}
		out = v
	case []int8:
		if err := firstErr(typed("[]int8", "i1"), count(len(v))); err != nil {
			return nil, err
		}
		out = make([]byte, total)
		for i, x := range v {
			out[i] = byte(x)
		}
	case []int16:
		if err := firstErr(typed("[]int16", "i2"), count(len(v))); err != nil {
			return nil, err
		}
		out = make([]byte, 0, total)
		for _, x := range v {
			out = binary.LittleEndian.AppendUint16(out, uint16(x))
		}
	case []uint16:
		if err := firstErr(typed("[]uint16", "u2"), count(len(v))); err != nil {
			return nil, err
		}
		out = make([]byte, 0, total)
		for _, x := range v {
			out = binary.LittleEndian.AppendUint16(out, x)
		}
	case []int32:
		if err := firstErr(typed("[]int32", "i4"), count(len(v))); err != nil {
			return nil, err
		}
		out = make([]byte, 0, total)
		for _, x := range v {
			out = binary.LittleEndian.AppendUint32(out, uint32(x))
		}
	case []int64:
		if err := firstErr(typed("[]int64", "i8"), count(len(v))); err != nil {
			return nil, err
		}
		out = make([]byte, 0, total)
		for _, x := range v {
			out = binary.LittleEndian.AppendUint64(out, uint64(x))
		}
	case []float32:
		if err := firstErr(typed("[]float32", "f4"), count(len(v))); err != nil {
			return nil, err
		}
		out = make([]byte, 0, total)
		for _, x := range v {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
		}
	case []float64:
		if err := firstErr(typed("[]float64", "f8"), count(len(v))); err != nil {
			return nil, err
		}
		out = make([]byte, 0, total)
		for _, x := range v {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(x))
		}
	default:
		return nil, fmt.Errorf("value of type %T for a %s array", v, dtype)
	}
	return out, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// IMAGE_MODES of FFCV: the mode byte of an image's metadata.
const (
	modeJPEG = 0
	modeRaw  = 1
)

func (f RGBImageField) encode(w *worker, sample int, v any, meta []byte) ([]byte, error) {
	channels, err := f.channels()
	if err != nil {
		return nil, err
	}
	var img transform.Image
	var encoded EncodedJPEG
	comps := 0
	switch v := v.(type) {
	case transform.Image:
		img = v
		if img.Channels != channels {
			return nil, fmt.Errorf("%d-channel image for a %d-channel field", img.Channels, channels)
		}
		if img.Width <= 0 || img.Height <= 0 || img.Stride < img.Width*img.Channels ||
			len(img.Pix) < (img.Height-1)*img.Stride+img.Width*img.Channels {
			return nil, fmt.Errorf("invalid %dx%dx%d image (stride %d, %d pixel bytes)", img.Width, img.Height, img.Channels, img.Stride, len(img.Pix))
		}
	case EncodedJPEG:
		encoded = v
		var wd, ht int
		wd, ht, comps, err = jpeg.DecodeConfig(v)
		if err != nil {
			return nil, err
		}
		img = transform.Image{Width: wd, Height: ht, Channels: channels}
	default:
		return nil, fmt.Errorf("value of type %T, want transform.Image or EncodedJPEG", v)
	}

	// FFCV's resizer: ratio = max_resolution / max(w, h); if ratio < 1 the
	// new size is (ratio·(w, h)).astype(int).
	wd, ht := img.Width, img.Height
	resize := f.MaxResolution > 0 && max(wd, ht) > f.MaxResolution
	if resize {
		ratio := float64(f.MaxResolution) / float64(max(wd, ht))
		wd, ht = int(ratio*float64(wd)), int(ratio*float64(ht))
		if wd == 0 || ht == 0 {
			return nil, fmt.Errorf("%dx%d image shrinks to %dx%d at max resolution %d", img.Width, img.Height, wd, ht, f.MaxResolution)
		}
	}
	if wd > math.MaxUint16 || ht > math.MaxUint16 {
		return nil, fmt.Errorf("%dx%d image: sides are stored in 16 bits", wd, ht)
	}

	asJPEG := false
	switch f.Mode {
	case WriteJPEG:
		asJPEG = true
	case WriteSmart:
		asJPEG = f.SmartThreshold > 0 && wd*ht*channels > f.SmartThreshold
	case WriteProportion:
		r := transform.NewRand(w.seed, 0, uint64(sample), uint32(w.field))
		asJPEG = r.Float64() < f.CompressProbability
	}

	meta[0] = modeRaw
	if asJPEG {
		meta[0] = modeJPEG
	}
	binary.LittleEndian.PutUint16(meta[1:], uint16(wd))
	binary.LittleEndian.PutUint16(meta[3:], uint16(ht))

	if encoded != nil {
		if asJPEG && !resize && comps == channels {
			return encoded, nil
		}
		img = transform.NewImage(img.Width, img.Height, channels)
		if err := w.decoder().Decode(img, encoded, 1); err != nil {
			return nil, err
		}
	}
	if resize {
		dst := transform.NewImage(wd, ht, channels)
		transform.Resize(dst, img, transform.Rect{}, transform.Area)
		img = dst
	}
	if asJPEG {
		q := f.JPEGQuality
		if q == 0 {
			q = 90
		}
		var buf bytes.Buffer
		buf.Grow(wd * ht * channels / 4)
		if err := jpeg.Encode(&buf, img, q); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	row := wd * channels
	if img.Stride == row {
		return img.Pix[:row*ht], nil
	}
	out := make([]byte, 0, row*ht)
	for y := range ht {
		out = append(out, img.Row(y)...)
	}
	return out, nil
}
