package dataset

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// idxBytes encodes an IDX file by hand, independently of WriteIDX.
func idxBytes(typ byte, dims []uint32, data []byte) []byte {
	b := []byte{0, 0, typ, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, data...)
}

func gzipBytes(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(7*i + 3)
	}
	return b
}

func TestReadIDX(t *testing.T) {
	t.Parallel()
	images := idxBytes(0x08, []uint32{2, 3, 4}, seq(24))
	gz := gzipBytes(t, images)
	badCRC := bytes.Clone(gz)
	badCRC[len(badCRC)-6] ^= 0xff
	tests := []struct {
		name    string
		in      []byte
		typ     IDXType
		dims    []int
		data    []byte
		wantErr string
	}{
		{name: "uint8 images", in: images, typ: IDXUint8, dims: []int{2, 3, 4}, data: seq(24)},
		{name: "gzip", in: gz, typ: IDXUint8, dims: []int{2, 3, 4}, data: seq(24)},
		{name: "labels", in: idxBytes(0x08, []uint32{5}, seq(5)), typ: IDXUint8, dims: []int{5}, data: seq(5)},
		{name: "int32", in: idxBytes(0x0C, []uint32{2, 1}, seq(8)), typ: IDXInt32, dims: []int{2, 1}, data: seq(8)},
		{name: "float64", in: idxBytes(0x0E, []uint32{1}, seq(8)), typ: IDXFloat64, dims: []int{1}, data: seq(8)},
		{name: "empty array", in: idxBytes(0x08, []uint32{0, 28, 28}, nil), typ: IDXUint8, dims: []int{0, 28, 28}, data: []byte{}},
		{name: "zero dim then huge", in: idxBytes(0x08, []uint32{0, 1 << 31, 1 << 31}, nil), typ: IDXUint8, dims: []int{0, 1 << 31, 1 << 31}, data: []byte{}},
		{name: "empty input", in: nil, wantErr: "header"},
		{name: "one byte", in: []byte{0}, wantErr: "header"},
		{name: "short header", in: []byte{0, 0, 8}, wantErr: "header"},
		{name: "bad magic", in: []byte{1, 0, 8, 1, 0, 0, 0, 0}, wantErr: "bad magic"},
		{name: "unknown type", in: idxBytes(0x0A, []uint32{1}, seq(1)), wantErr: "unknown element type"},
		{name: "no dims", in: []byte{0, 0, 8, 0, 42}, wantErr: "no dimensions"},
		{name: "short dims", in: []byte{0, 0, 8, 2, 0, 0, 0, 1, 0, 0}, wantErr: "dimensions"},
		{name: "truncated payload", in: images[:len(images)-1], wantErr: "truncated: 23 of 24 bytes"},
		{name: "trailing byte", in: append(bytes.Clone(images), 0), wantErr: "trailing"},
		{name: "too large", in: idxBytes(0x08, []uint32{1 << 31, 1 << 31}, nil), wantErr: "more than"},
		{name: "too large float64", in: idxBytes(0x0E, []uint32{1 << 30}, nil), wantErr: "more than"},
		{name: "huge claim short data", in: idxBytes(0x08, []uint32{1 << 30, 2}, seq(10)), wantErr: "truncated: 10 of 2147483648"},
		{name: "gzip truncated", in: gz[:len(gz)-3], wantErr: "unexpected EOF"},
		{name: "gzip header only", in: gz[:5], wantErr: "gzip"},
		{name: "gzip bad checksum", in: badCRC, wantErr: "checksum"},
		{name: "gzip trailing garbage", in: append(bytes.Clone(gz), 1, 2, 3), wantErr: "after 24 of 24 bytes: unexpected EOF"},
		{name: "gzip trailing member", in: append(bytes.Clone(gz), gzipBytes(t, []byte{1})...), wantErr: "trailing bytes"},
		{name: "gzip of truncated idx", in: gzipBytes(t, images[:20]), wantErr: "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x, err := ReadIDX(bytes.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ReadIDX succeeded with %s %v, want error containing %q", x.Type, x.Dims, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "dataset: idx: ") {
					t.Fatalf("error %q, want prefix \"dataset: idx: \" and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if x.Type != tt.typ || !equalInts(x.Dims, tt.dims) || !bytes.Equal(x.Data, tt.data) {
				t.Fatalf("got %s %v %v, want %s %v %v", x.Type, x.Dims, x.Data, tt.typ, tt.dims, tt.data)
			}
		})
	}
}

func TestReadIDXTruncatedIsUnexpectedEOF(t *testing.T) {
	t.Parallel()
	full := idxBytes(0x08, []uint32{3, 2}, seq(6))
	for n := range len(full) {
		_, err := ReadIDX(bytes.NewReader(full[:n]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d of %d bytes: error %v, want io.ErrUnexpectedEOF", n, len(full), err)
		}
	}
}

func TestReadIDXHint(t *testing.T) {
	t.Parallel()
	in := idxBytes(0x08, []uint32{3, 5}, seq(15))
	for _, hint := range []int64{-1, 0, 10, int64(len(in)), 1 << 40} {
		x, err := readIDX(bytes.NewReader(in), hint)
		if err != nil || !bytes.Equal(x.Data, seq(15)) {
			t.Errorf("hint %d: %v, %v", hint, x, err)
		}
		if _, err := readIDX(bytes.NewReader(in[:len(in)-1]), hint); err == nil {
			t.Errorf("hint %d: truncated input accepted", hint)
		}
	}
}

func TestWriteIDX(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		x       IDX
		want    []byte
		wantErr string
	}{
		{name: "images", x: IDX{IDXUint8, []int{2, 3}, seq(6)}, want: idxBytes(0x08, []uint32{2, 3}, seq(6))},
		{name: "int16", x: IDX{IDXInt16, []int{3}, seq(6)}, want: idxBytes(0x0B, []uint32{3}, seq(6))},
		{name: "bad type", x: IDX{0x07, []int{1}, seq(1)}, wantErr: "unknown element type"},
		{name: "no dims", x: IDX{IDXUint8, nil, seq(1)}, wantErr: "dimensions"},
		{name: "negative dim", x: IDX{IDXUint8, []int{-1}, nil}, wantErr: "out of range"},
		{name: "data size", x: IDX{IDXFloat32, []int{2}, seq(4)}, wantErr: "want 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			err := WriteIDX(&buf, &tt.x)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), tt.want) {
				t.Fatalf("wrote % x, want % x", buf.Bytes(), tt.want)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzReadIDX checks that ReadIDX never panics, and that what it accepts is
// exactly what WriteIDX writes back (or its gzip compression).
func FuzzReadIDX(f *testing.F) {
	for _, s := range [][]byte{
		idxBytes(0x08, []uint32{2, 3, 4}, seq(24)),
		idxBytes(0x08, []uint32{5}, seq(5)),
		idxBytes(0x0D, []uint32{1, 2}, seq(8)),
		idxBytes(0x08, []uint32{0, 28, 28}, nil),
		idxBytes(0x08, []uint32{1 << 20, 28, 28}, seq(3)),
		gzipBytes(f, idxBytes(0x08, []uint32{4, 2}, seq(8))),
		{0, 0, 8},
		{0x1f, 0x8b},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		x, err := ReadIDX(bytes.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dataset: idx: ") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		if want := x.NumElements() * x.Type.Size(); len(x.Data) != want {
			t.Fatalf("%s %v with %d data bytes, want %d", x.Type, x.Dims, len(x.Data), want)
		}
		var buf bytes.Buffer
		if err := WriteIDX(&buf, x); err != nil {
			t.Fatalf("WriteIDX of an accepted array: %v", err)
		}
		if len(in) >= 2 && in[0] == 0x1f && in[1] == 0x8b {
			zr, err := gzip.NewReader(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if in, err = io.ReadAll(zr); err != nil {
				t.Fatalf("ReadIDX accepted a gzip stream that does not decompress: %v", err)
			}
		}
		if !bytes.Equal(buf.Bytes(), in) {
			t.Fatalf("round trip differs:\n got % x\nwant % x", buf.Bytes(), in)
		}
	})
}
