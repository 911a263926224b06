package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/flockml/flock/safetensors"
)

// The files of testdata/golden were written by gen_golden.py with a writer
// that follows the specification independently of this package.
var goldenFiles = []string{
	"dtypes.safetensors", "conv2d.safetensors", "pool2d.safetensors", "norm.safetensors",
	"softmax.safetensors", "cross_entropy.safetensors", "gelu.safetensors",
	"attention_f32.safetensors", "attention_f64.safetensors",
}

func TestPythonFilesReencodeIdentically(t *testing.T) {
	t.Parallel()
	for _, name := range goldenFiles {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "testdata", "golden", name))
			if err != nil {
				t.Fatal(err)
			}
			f, err := safetensors.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := safetensors.Marshal(f.Tensors, f.Metadata)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, b) {
				t.Errorf("re-encoding differs from the file written by Python (%d vs %d bytes)", len(enc), len(b))
			}
		})
	}
}

func TestPythonDTypes(t *testing.T) {
	t.Parallel()
	f, err := safetensors.Open(filepath.Join("..", "testdata", "golden", "dtypes.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"format": "pt", "note": "dtype coverage; \"quoted\"\tand tabbed"}; !reflect.DeepEqual(f.Metadata, want) {
		t.Errorf("metadata %q, want %q", f.Metadata, want)
	}
	// Each tensor's element i, as gen_golden.py defines it, decoded here from
	// the raw little-endian bytes.
	le := binary.LittleEndian
	tests := []struct {
		name  string
		dtype safetensors.DType
		shape []int
		elem  func(b []byte, i int) float64
		want  func(i int) float64
	}{
		{"f32", safetensors.F32, []int{3, 4}, func(b []byte, i int) float64 { return float64(math.Float32frombits(le.Uint32(b[4*i:]))) }, func(i int) float64 { return float64(i)/4 - 1 }},
		{"f64", safetensors.F64, []int{2, 3, 2}, func(b []byte, i int) float64 { return math.Float64frombits(le.Uint64(b[8*i:])) }, func(i int) float64 { return float64(i) / 3 }},
		{"f16", safetensors.F16, []int{12}, func(b []byte, i int) float64 { return half(le.Uint16(b[2*i:])) }, func(i int) float64 { return float64(i)/2 - 2 }},
		{"bf16", safetensors.BF16, []int{12}, func(b []byte, i int) float64 {
			return float64(math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16))
		}, func(i int) float64 { return float64(8*i - 40) }},
		{"i32", safetensors.I32, []int{4, 3}, func(b []byte, i int) float64 { return float64(int32(le.Uint32(b[4*i:]))) }, func(i int) float64 { return float64(3 - 7*i) }},
		{"i64", safetensors.I64, []int{12}, func(b []byte, i int) float64 { return float64(int64(le.Uint64(b[8*i:]))) }, func(i int) float64 { return float64(int64(i)<<33 - 5) }},
		{"u8", safetensors.U8, []int{12}, func(b []byte, i int) float64 { return float64(b[i]) }, func(i int) float64 { return float64(uint8(21 * i)) }},
		{"i8", safetensors.I8, []int{12}, func(b []byte, i int) float64 { return float64(int8(b[i])) }, func(i int) float64 { return float64(11*i - 60) }},
		{"i16", safetensors.I16, []int{12}, func(b []byte, i int) float64 { return float64(int16(le.Uint16(b[2*i:]))) }, func(i int) float64 { return float64(3000*i - 16000) }},
		{"bool", safetensors.BOOL, []int{2, 6}, func(b []byte, i int) float64 { return float64(b[i]) }, func(i int) float64 {
			if i%3 == 0 {
				return 1
			}
			return 0
		}},
		{"scalar", safetensors.F32, []int{}, func(b []byte, i int) float64 { return float64(math.Float32frombits(le.Uint32(b[4*i:]))) }, func(int) float64 { return 2.5 }},
		{"empty", safetensors.F32, []int{0, 3}, nil, nil},
	}
	if len(f.Tensors) != len(tests) {
		t.Errorf("file has %d tensors (%q), want %d", len(f.Tensors), f.Names(), len(tests))
	}
	for _, tc := range tests {
		x, ok := f.Tensors[tc.name]
		if !ok {
			t.Errorf("%q missing", tc.name)
			continue
		}
		if x.DType != tc.dtype || !reflect.DeepEqual(x.Shape, tc.shape) {
			t.Errorf("%q: %s%v, want %s%v", tc.name, x.DType, x.Shape, tc.dtype, tc.shape)
			continue
		}
		for i := range x.NumElements() {
			if got, want := tc.elem(x.Data, i), tc.want(i); got != want {
				t.Errorf("%q[%d] = %v, want %v", tc.name, i, got, want)
			}
		}
		if _, ok := tc.dtype.Flock(); !ok {
			continue
		}
		tt, err := x.ToTensor()
		if err != nil {
			t.Errorf("%q: %v", tc.name, err)
			continue
		}
		if tc.dtype != safetensors.F16 && tc.dtype != safetensors.BF16 {
			got := tt.Float64s()
			for i := range got {
				if want := tc.want(i); got[i] != want {
					t.Errorf("%q: tensor element %d = %v, want %v", tc.name, i, got[i], want)
				}
			}
		}
		tt.Release()
	}
}

// half decodes an IEEE binary16 value.
func half(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+m/1024, e-15)
}
