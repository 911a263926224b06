package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
)

// This file reads event files back for the tests, apart from the
// package's encoder: TFRecords with both checksums checked, and the
// Event, Summary and Value messages decoded field by field from their
// wire format, unknown fields skipped.

// testEvent is a decoded Event.
type testEvent struct {
	Wall    float64
	Step    int64
	Version string
	// Summary reports whether the event held a Summary, Values its
	// values.
	Summary bool
	Values  []Value
	// Data is the event's serialized bytes.
	Data []byte
}

// readEventFile decodes the event file at path.
func readEventFile(path string) ([]testEvent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := splitRecords(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var evs []testEvent
	for i, r := range recs {
		e, err := decodeEvent(r)
		if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// crcMask is TFRecord's masking of a CRC-32C.
func crcMask(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	rotated := c<<17 | c>>15
	return rotated + 0xa282ead8
}

// splitRecords returns the data of each TFRecord of b.
func splitRecords(b []byte) ([][]byte, error) {
	var recs [][]byte
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			return nil, fmt.Errorf("offset %d: %d bytes, short of a record header", off, len(b)-off)
		}
		head := b[off : off+8]
		n := binary.LittleEndian.Uint64(head)
		if got, want := binary.LittleEndian.Uint32(b[off+8:]), crcMask(head); got != want {
			return nil, fmt.Errorf("offset %d: length CRC %#x, want %#x", off, got, want)
		}
		off += 12
		if n > uint64(len(b)-off) || len(b)-off-int(n) < 4 {
			return nil, fmt.Errorf("offset %d: record of %d bytes runs past the end", off, n)
		}
		data := b[off : off+int(n)]
		if got, want := binary.LittleEndian.Uint32(b[off+int(n):]), crcMask(data); got != want {
			return nil, fmt.Errorf("offset %d: data CRC %#x, want %#x", off, got, want)
		}
		recs = append(recs, data)
		off += int(n) + 4
	}
	return recs, nil
}

// protoField is one field of a protocol buffer message.
type protoField struct {
	num, wire int
	// x holds a varint or fixed value, b a length-delimited one.
	x uint64
	b []byte
}

// protoFields splits a message into its fields.
func protoFields(b []byte) ([]protoField, error) {
	var fs []protoField
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad key")
		}
		b = b[n:]
		f := protoField{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case 0:
			f.x, n = binary.Uvarint(b)
			if n <= 0 {
				return nil, fmt.Errorf("field %d: bad varint", f.num)
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return nil, fmt.Errorf("field %d: short fixed64", f.num)
			}
			f.x, b = binary.LittleEndian.Uint64(b), b[8:]
		case 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return nil, fmt.Errorf("field %d: bad length", f.num)
			}
			f.b, b = b[n:n+int(l)], b[n+int(l):]
		case 5:
			if len(b) < 4 {
				return nil, fmt.Errorf("field %d: short fixed32", f.num)
			}
			f.x, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		default:
			return nil, fmt.Errorf("field %d: wire type %d", f.num, f.wire)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// decodeEvent decodes an Event: wall_time 1 (double), step 2 (int64),
// file_version 3 (string), summary 5 (Summary: value 1, each a Value of
// tag 1 and simple_value 2).
func decodeEvent(data []byte) (testEvent, error) {
	e := testEvent{Data: data}
	fs, err := protoFields(data)
	if err != nil {
		return e, err
	}
	for _, f := range fs {
		switch {
		case f.num == 1 && f.wire == 1:
			e.Wall = math.Float64frombits(f.x)
		case f.num == 2 && f.wire == 0:
			e.Step = int64(f.x)
		case f.num == 3 && f.wire == 2:
			e.Version = string(f.b)
		case f.num == 5 && f.wire == 2:
			e.Summary = true
			vs, err := protoFields(f.b)
			if err != nil {
				return e, fmt.Errorf("summary: %w", err)
			}
			for _, v := range vs {
				if v.num != 1 || v.wire != 2 {
					continue
				}
				parts, err := protoFields(v.b)
				if err != nil {
					return e, fmt.Errorf("summary value: %w", err)
				}
				var val Value
				simple := false
				for _, p := range parts {
					switch {
					case p.num == 1 && p.wire == 2:
						val.Tag = string(p.b)
					case p.num == 2 && p.wire == 5:
						val.Value = float64(math.Float32frombits(uint32(p.x)))
						simple = true
					}
				}
				if !simple {
					return e, fmt.Errorf("value %q: no simple_value", val.Tag)
				}
				e.Values = append(e.Values, val)
			}
		}
	}
	return e, nil
}
