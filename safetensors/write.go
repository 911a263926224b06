package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/flockml/flock/internal/atomicfile"
)

// Marshal returns the safetensors encoding of tensors and metadata; see Write.
func Marshal(tensors map[string]Tensor, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	if err := Write(&b, tensors, metadata); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write encodes tensors and metadata (which may be nil) to w.
//
// The output is a pure function of its arguments and matches the reference
// implementation's: tensors are laid out by decreasing element alignment
// (U64, I64, F64, F32, ..., BOOL; see the DType constants) and then by name,
// metadata keys in increasing order, and the compact JSON header is padded
// with spaces to a multiple of 8 bytes so that every tensor starts aligned.
// An empty metadata map is omitted.
func Write(w io.Writer, tensors map[string]Tensor, metadata map[string]string) error {
	type named struct {
		name string
		t    Tensor
	}
	list := make([]named, 0, len(tensors))
	for name, t := range tensors {
		if err := checkTensor(name, t); err != nil {
			return err
		}
		list = append(list, named{name, t})
	}
	slices.SortFunc(list, func(a, b named) int {
		return cmp.Or(cmp.Compare(b.t.DType.rank(), a.t.DType.rank()), cmp.Compare(a.name, b.name))
	})
	keys := make([]string, 0, len(metadata))
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("safetensors: write: metadata %q: not valid UTF-8", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)

	h := []byte{'{'}
	if len(keys) > 0 {
		h = appendString(h, metadataKey)
		h = append(h, ":{"...)
		for i, k := range keys {
			if i > 0 {
				h = append(h, ',')
			}
			h = appendString(h, k)
			h = append(h, ':')
			h = appendString(h, metadata[k])
		}
		h = append(h, '}')
	}
	var off int64
	for i, e := range list {
		if i > 0 || len(keys) > 0 {
			h = append(h, ',')
		}
		h = appendString(h, e.name)
		h = append(h, `:{"dtype":`...)
		h = appendString(h, string(e.t.DType))
		h = append(h, `,"shape":[`...)
		for j, d := range e.t.Shape {
			if j > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendInt(h, int64(d), 10)
		}
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendInt(h, off, 10)
		h = append(h, ',')
		off += int64(len(e.t.Data))
		h = strconv.AppendInt(h, off, 10)
		h = append(h, "]}"...)
	}
	h = append(h, '}')
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	if len(h) > MaxHeaderSize {
		return fmt.Errorf("safetensors: write: header of %d bytes exceeds the limit of %d", len(h), MaxHeaderSize)
	}

	var lb [8]byte
	binary.LittleEndian.PutUint64(lb[:], uint64(len(h)))
	if _, err := w.Write(lb[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(h); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, e := range list {
		if _, err := w.Write(e.t.Data); err != nil {
			return fmt.Errorf("safetensors: write: tensor %q: %w", e.name, err)
		}
	}
	return nil
}

// checkTensor applies the reader's rules to a tensor about to be written.
func checkTensor(name string, t Tensor) error {
	if name == metadataKey {
		return fmt.Errorf("safetensors: write: %q is reserved for metadata and cannot name a tensor", name)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("safetensors: write: tensor %q: name is not valid UTF-8", name)
	}
	if !t.DType.Valid() {
		return fmt.Errorf("safetensors: write: tensor %q: unknown dtype %q", name, t.DType)
	}
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("safetensors: write: tensor %q: negative extent in shape %v", name, t.Shape)
		}
		if d > 0 && n > math.MaxInt64/int64(d) {
			return fmt.Errorf("safetensors: write: tensor %q: shape %v has too many elements", name, t.Shape)
		}
		n *= int64(d)
	}
	if int64(len(t.Data)) != n {
		return fmt.Errorf("safetensors: write: tensor %q: %d bytes of data for %s%v, which needs %d", name, len(t.Data), t.DType, t.Shape, n)
	}
	return nil
}

// appendString appends s as a JSON string, escaped as serde_json (the
// reference implementation's serialiser) does: quote, backslash and control
// characters only.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}

// WriteFile writes tensors and metadata to path atomically: the file is
// written under a temporary name in the same directory, synced, renamed over
// path and the directory synced, so that path holds either its old contents
// or the complete new file, even across a crash.
func WriteFile(path string, tensors map[string]Tensor, metadata map[string]string) error {
	var format error
	err := atomicfile.Write(path, func(w io.Writer) error {
		format = Write(w, tensors, metadata)
		return format
	})
	switch {
	case format != nil:
		return fmt.Errorf("%w (file %s)", format, path)
	case err != nil:
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	return nil
}
