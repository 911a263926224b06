package tensorboard

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"time"
)

// FileVersion is the file_version of an event file's first Event: events
// of version 2 are read in order, whatever their steps.
const FileVersion = "brain.Event:2"

// Value is one scalar of an Event: Summary.Value{tag, simple_value}.
type Value struct {
	Tag   string
	Value float64
}

// Wire types and the field keys ((number << 3) | wire type) of the
// messages written, from TensorFlow's event.proto and summary.proto.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5

	eventWallTime    = 1<<3 | wireFixed64 // Event.wall_time, double
	eventStep        = 2<<3 | wireVarint  // Event.step, int64
	eventFileVersion = 3<<3 | wireBytes   // Event.file_version, string
	eventSummary     = 5<<3 | wireBytes   // Event.summary, Summary
	summaryValue     = 1<<3 | wireBytes   // Summary.value, repeated Value
	valueTag         = 1<<3 | wireBytes   // Summary.Value.tag, string
	valueSimple      = 2<<3 | wireFixed32 // Summary.Value.simple_value, float
)

// castagnoli is the table of CRC-32C, the checksum of TFRecords.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC returns the masked CRC-32C of b: rotated right by 15 bits and
// offset, so that the checksum of bytes holding checksums stays apart
// from them.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendRecord appends data framed as a TFRecord: its length, the
// length's masked CRC, data, and data's masked CRC.
func appendRecord(b, data []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(b[start:]))
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, maskedCRC(data))
}

// wallTime returns t in seconds since the Unix epoch.
func wallTime(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// appendVersionEvent appends the Event that opens a file:
// {wall_time, file_version}.
func appendVersionEvent(b []byte, wall float64) []byte {
	b = appendWallTime(b, wall)
	return appendBytesField(b, eventFileVersion, []byte(FileVersion))
}

// appendScalarEvent appends the Event {wall_time, step, summary{values}},
// a zero wall time or step left out as proto3 does.
func appendScalarEvent(b []byte, wall float64, step int64, values []Value) []byte {
	b = appendWallTime(b, wall)
	if step != 0 {
		b = binary.AppendUvarint(append(b, eventStep), uint64(step))
	}
	b = append(b, eventSummary)
	b = binary.AppendUvarint(b, uint64(summarySize(values)))
	for _, v := range values {
		b = append(b, summaryValue)
		b = binary.AppendUvarint(b, uint64(valueSize(v)))
		b = appendBytesField(b, valueTag, []byte(v.Tag))
		b = binary.LittleEndian.AppendUint32(append(b, valueSimple), math.Float32bits(float32(v.Value)))
	}
	return b
}

// valueSize is the length of the encoded Summary.Value v.
func valueSize(v Value) int {
	return bytesFieldSize(len(v.Tag)) + 1 + 4
}

// summarySize is the length of the encoded Summary of values.
func summarySize(values []Value) int {
	n := 0
	for _, v := range values {
		n += bytesFieldSize(valueSize(v))
	}
	return n
}

// bytesFieldSize is the length of a length-delimited field of n bytes
// with a one-byte key.
func bytesFieldSize(n int) int {
	return 1 + uvarintSize(uint64(n)) + n
}

// uvarintSize is the length of x as a varint.
func uvarintSize(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// appendWallTime appends Event.wall_time unless its bits are zero.
func appendWallTime(b []byte, wall float64) []byte {
	if bits := math.Float64bits(wall); bits != 0 {
		b = binary.LittleEndian.AppendUint64(append(b, eventWallTime), bits)
	}
	return b
}

func appendBytesField(b []byte, key byte, s []byte) []byte {
	b = binary.AppendUvarint(append(b, key), uint64(len(s)))
	return append(b, s...)
}
