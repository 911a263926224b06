package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const testdata = "../testdata/ffcv"

func TestReadFFCVTestdata(t *testing.T) {
	t.Parallel()
	labels, err := ReadFile(filepath.Join(testdata, "jpeg_q90_max256.labels.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if labels.DType != "<i8" || !slices.Equal(labels.Shape, []int{48}) {
		t.Fatalf("labels: dtype %s shape %v, want <i8 [48]", labels.DType, labels.Shape)
	}
	l, err := labels.Int64()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range l {
		if v != int64(i%10) {
			t.Fatalf("label %d = %d, want %d", i, v, i%10)
		}
	}
	images, err := ReadFile(filepath.Join(testdata, "raw_all_fields.images.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if images.DType != "|u1" || !slices.Equal(images.Shape, []int{64, 32, 32, 3}) {
		t.Fatalf("images: dtype %s shape %v", images.DType, images.Shape)
	}
	pix, err := images.Uint8()
	if err != nil || len(pix) != 64*32*32*3 {
		t.Fatalf("Uint8: %d bytes, %v", len(pix), err)
	}
	if _, err := images.Float32(); err == nil {
		t.Error("Float32 of a u1 array succeeded")
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dtype string
		shape []int
	}{
		{"|u1", []int{2, 3}}, {"|b1", []int{4}}, {"|i1", []int{5}},
		{"<u2", []int{3}}, {"<i2", []int{1, 1, 3}}, {"<f2", []int{2}},
		{"<u4", []int{3}}, {"<i4", []int{2, 2}}, {"<f4", []int{3, 4}},
		{"<u8", []int{1}}, {"<i8", []int{}}, {"<f8", []int{2, 0, 3}},
		{"<f4", []int{70000}},
	} {
		a := &Array{DType: tc.dtype, Shape: tc.shape}
		n := a.NumElements() * a.ItemSize()
		a.Data = make([]byte, n)
		for i := range a.Data {
			a.Data[i] = byte(i*7 + 1)
		}
		var buf bytes.Buffer
		if err := Write(&buf, a); err != nil {
			t.Fatalf("%s %v: %v", tc.dtype, tc.shape, err)
		}
		if hdr := buf.Len() - n; hdr%64 != 0 {
			t.Errorf("%s %v: data starts at %d, not a multiple of 64", tc.dtype, tc.shape, hdr)
		}
		b, err := Read(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%s %v: %v", tc.dtype, tc.shape, err)
		}
		if b.DType != a.DType || !slices.Equal(b.Shape, a.Shape) || !bytes.Equal(b.Data, a.Data) {
			t.Errorf("%s %v: read back %s %v", tc.dtype, tc.shape, b.DType, b.Shape)
		}
	}
}

func TestConversions(t *testing.T) {
	t.Parallel()
	le := binary.LittleEndian
	i16 := &Array{DType: "<i2", Shape: []int{2}, Data: le.AppendUint16(le.AppendUint16(nil, 0xfffe), 7)}
	if got, err := i16.Int64(); err != nil || !slices.Equal(got, []int64{-2, 7}) {
		t.Errorf("i2 Int64 = %v, %v", got, err)
	}
	if got, err := i16.Float64(); err != nil || !slices.Equal(got, []float64{-2, 7}) {
		t.Errorf("i2 Float64 = %v, %v", got, err)
	}
	// IEEE 754 binary16 encodings: 1, −2, the largest finite value, the
	// smallest subnormal, +Inf and −0.
	halves := []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x8000}
	want := []float32{1, -2, 65504, float32(math.Ldexp(1, -24)), float32(math.Inf(1)), float32(math.Copysign(0, -1))}
	var d []byte
	for _, h := range halves {
		d = le.AppendUint16(d, h)
	}
	f2 := &Array{DType: "<f2", Shape: []int{len(halves)}, Data: d}
	got, err := f2.Float32()
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("half %#04x = %v, want %v", halves[i], got[i], want[i])
		}
	}
	short := &Array{DType: "<f4", Shape: []int{3}, Data: make([]byte, 8)}
	if _, err := short.Float32(); err == nil || !strings.Contains(err.Error(), "8 data bytes") {
		t.Errorf("short data: err = %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	good := func(dict string, data int) []byte {
		b := []byte("\x93NUMPY\x01\x00")
		b = le16(b, len(dict))
		b = append(b, dict...)
		return append(b, make([]byte, data)...)
	}
	v2 := []byte("\x93NUMPY\x02\x00")
	unterminated := "{'descr': '<u2', 'fortran_order': False, 'shape': ()"
	v2 = binary.LittleEndian.AppendUint32(v2, uint32(len(unterminated)))
	v2 = append(v2, unterminated...)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "preamble"},
		{"magic", []byte("\x93NUMPX\x01\x00\x00\x00"), "bad magic"},
		{"version", []byte("\x93NUMPY\x04\x00\x00\x00"), "version 4"},
		{"fortran", good("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", 4), "Fortran"},
		{"big-endian", good("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4), "unsupported dtype"},
		{"object", good("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", 8), "unsupported dtype"},
		{"short", good("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4), "data"},
		{"trailing", good("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 5), "trailing"},
		{"missing", good("{'descr': '<f4', 'shape': (1,), }", 4), "missing"},
		{"huge", good("{'descr': '<f8', 'fortran_order': False, 'shape': (9999999999, 9999999999), }", 0), "more than"},
		{"v2 unterminated", v2, "want ',' or '}'"},
	} {
		_, err := Read(bytes.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

func le16(b []byte, v int) []byte { return binary.LittleEndian.AppendUint16(b, uint16(v)) }

func TestWriteFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a.npy")
	a := &Array{DType: "<i4", Shape: []int{2}, Data: []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}}
	if err := WriteFile(path, a); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Int64(); !slices.Equal(got, []int64{1, -1}) {
		t.Errorf("read back %v", got)
	}
	if err := Write(&bytes.Buffer{}, &Array{DType: "<i4", Shape: []int{3}, Data: a.Data}); err == nil {
		t.Error("Write accepted data of the wrong length")
	}
}

func FuzzRead(f *testing.F) {
	for _, name := range []string{"jpeg_q90_max256.labels.npy"} {
		b, err := os.ReadFile(filepath.Join(testdata, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'shape': (3,),}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(a.Data) != a.NumElements()*a.ItemSize() {
			t.Fatalf("%d data bytes for %s %v", len(a.Data), a.DType, a.Shape)
		}
		a.Float64()
		var buf bytes.Buffer
		if err := Write(&buf, a); err != nil {
			t.Fatalf("Write of a parsed array: %v", err)
		}
	})
}

func Example() {
	var buf bytes.Buffer
	a := &Array{DType: "|u1", Shape: []int{2, 2}, Data: []byte{1, 2, 3, 4}}
	if err := Write(&buf, a); err != nil {
		panic(err)
	}
	b, err := Read(&buf)
	if err != nil {
		panic(err)
	}
	v, _ := b.Float64()
	fmt.Println(b.DType, b.Shape, v)
	// Output: |u1 [2 2] [1 2 3 4]
}
