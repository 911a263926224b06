package safetensors_test

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

func TestFromTensorLayout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		make  func() *tensor.Tensor
		dtype safetensors.DType
		shape []int
		data  []byte
	}{
		{
			name:  "float32",
			make:  func() *tensor.Tensor { return tensor.FromSlice([]float32{1, -2, 0.5}, nil) },
			dtype: safetensors.F32, shape: []int{3},
			data: binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(1)), math.Float32bits(-2)), math.Float32bits(0.5)),
		},
		{
			name:  "float64 scalar",
			make:  func() *tensor.Tensor { return tensor.FromSlice([]float64{math.Pi}, tensor.Shape{}) },
			dtype: safetensors.F64, shape: []int{},
			data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Pi)),
		},
		{
			name:  "int64",
			make:  func() *tensor.Tensor { return tensor.FromSlice([]int64{-1, 1 << 40}, tensor.Shape{2, 1}) },
			dtype: safetensors.I64, shape: []int{2, 1},
			data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.MaxUint64), 1<<40),
		},
		{
			name:  "int32",
			make:  func() *tensor.Tensor { return tensor.FromSlice([]int32{7, -3}, nil) },
			dtype: safetensors.I32, shape: []int{2},
			data: []byte{7, 0, 0, 0, 0xfd, 0xff, 0xff, 0xff},
		},
		{
			name:  "uint8 and bool",
			make:  func() *tensor.Tensor { return tensor.FromSlice([]uint8{0, 255, 9}, nil) },
			dtype: safetensors.U8, shape: []int{3},
			data: []byte{0, 255, 9},
		},
		{
			name:  "bool",
			make:  func() *tensor.Tensor { return tensor.FromSlice([]bool{true, false, true}, nil) },
			dtype: safetensors.BOOL, shape: []int{3},
			data: []byte{1, 0, 1},
		},
		{
			name:  "empty",
			make:  func() *tensor.Tensor { return tensor.FromSlice([]float32{}, tensor.Shape{0, 4}) },
			dtype: safetensors.F32, shape: []int{0, 4},
			data: []byte{},
		},
		{
			name: "transposed view",
			make: func() *tensor.Tensor {
				x := tensor.FromSlice([]uint8{1, 2, 3, 4, 5, 6}, tensor.Shape{2, 3})
				defer x.Release()
				return x.T()
			},
			dtype: safetensors.U8, shape: []int{3, 2},
			data: []byte{1, 4, 2, 5, 3, 6},
		},
		{
			name: "sliced view",
			make: func() *tensor.Tensor {
				x := tensor.FromSlice([]int32{1, 2, 3, 4}, nil)
				defer x.Release()
				return x.Slice(0, 1, 3)
			},
			dtype: safetensors.I32, shape: []int{2},
			data: []byte{2, 0, 0, 0, 3, 0, 0, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := tc.make()
			defer x.Release()
			got := safetensors.FromTensor(x)
			if got.DType != tc.dtype || !reflect.DeepEqual(got.Shape, tc.shape) || string(got.Data) != string(tc.data) {
				t.Fatalf("FromTensor = %s%v %v, want %s%v %v", got.DType, got.Shape, got.Data, tc.dtype, tc.shape, tc.data)
			}
			back, err := got.ToTensor()
			if err != nil {
				t.Fatal(err)
			}
			defer back.Release()
			if back.DType() != x.DType() || !back.Shape().Equal(x.Shape()) {
				t.Fatalf("ToTensor: %v%v, want %v%v", back.DType(), back.Shape(), x.DType(), x.Shape())
			}
			if again := safetensors.FromTensor(back); string(again.Data) != string(tc.data) {
				t.Errorf("round trip changed the bytes: %v", again.Data)
			}
		})
	}
}

func TestToTensorHalfAndConversion(t *testing.T) {
	t.Parallel()
	// 1.5, -2 and the smallest subnormal in float16; 1.5, -2 and 2^-133
	// (a bfloat16 subnormal) in bfloat16.
	f16 := safetensors.Tensor{DType: safetensors.F16, Shape: []int{3}, Data: []byte{0x00, 0x3e, 0x00, 0xc0, 0x01, 0x00}}
	bf16 := safetensors.Tensor{DType: safetensors.BF16, Shape: []int{3}, Data: []byte{0xc0, 0x3f, 0x00, 0xc0, 0x01, 0x00}}
	tests := []struct {
		name string
		in   safetensors.Tensor
		want []float64
	}{
		{"float16", f16, []float64{1.5, -2, math.Ldexp(1, -24)}},
		{"bfloat16", bf16, []float64{1.5, -2, math.Ldexp(1, -133)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := tc.in.ToTensor()
			if err != nil {
				t.Fatal(err)
			}
			defer x.Release()
			if d, _ := tc.in.DType.Flock(); x.DType() != d {
				t.Fatalf("dtype %v, want %v", x.DType(), d)
			}
			if got := safetensors.FromTensor(x); string(got.Data) != string(tc.in.Data) {
				t.Errorf("bytes changed: %v", got.Data)
			}
			y, err := tc.in.ToTensor(tensor.Of(tensor.Float64))
			if err != nil {
				t.Fatal(err)
			}
			defer y.Release()
			if got := y.Float64s(); y.DType() != tensor.Float64 || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("as float64: %v %v, want %v", y.DType(), got, tc.want)
			}
		})
	}
}

func TestToTensorErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   safetensors.Tensor
		want string
	}{
		{"no flock dtype", safetensors.Tensor{DType: safetensors.I16, Shape: []int{1}, Data: []byte{1, 0}}, `"I16" has no flock dtype`},
		{"unknown dtype", safetensors.Tensor{DType: "Q"}, `"Q" has no flock dtype`},
		{"short data", safetensors.Tensor{DType: safetensors.F32, Shape: []int{2}, Data: []byte{1}}, "1 bytes of data for F32[2], which needs 8"},
		{"negative extent", safetensors.Tensor{DType: safetensors.F32, Shape: []int{-1}}, "negative extent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := tc.in.ToTensor()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				x.Release()
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestBoolBytesNormalised(t *testing.T) {
	t.Parallel()
	x, err := safetensors.Tensor{DType: safetensors.BOOL, Shape: []int{4}, Data: []byte{0, 1, 2, 255}}.ToTensor()
	if err != nil {
		t.Fatal(err)
	}
	defer x.Release()
	if got := safetensors.FromTensor(x).Data; string(got) != string([]byte{0, 1, 1, 1}) {
		t.Errorf("bool bytes %v, want [0 1 1 1]", got)
	}
}

func TestSaveLoadTensors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.safetensors")
	w := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, tensor.Shape{2, 3})
	defer w.Release()
	labels := tensor.FromSlice([]int64{3, 1}, nil)
	defer labels.Release()
	mask := tensor.FromSlice([]bool{true, false}, tensor.Shape{1, 2})
	defer mask.Release()
	in := map[string]*tensor.Tensor{"layer.weight": w, "labels": labels, "mask": mask}
	if err := safetensors.SaveTensors(path, in, map[string]string{"epoch": "3"}); err != nil {
		t.Fatal(err)
	}
	out, err := safetensors.LoadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range in {
		y := out[name]
		if y == nil {
			t.Fatalf("%q missing", name)
		}
		if y.DType() != x.DType() || !y.Shape().Equal(x.Shape()) || !reflect.DeepEqual(y.Float64s(), x.Float64s()) {
			t.Errorf("%q: got %v, want %v", name, y, x)
		}
		y.Release()
	}
	f, err := safetensors.Open(path)
	if err != nil || f.Metadata["epoch"] != "3" {
		t.Errorf("metadata %v (%v)", f.Metadata, err)
	}

	bad := filepath.Join(t.TempDir(), "i16.safetensors")
	if err := safetensors.WriteFile(bad, map[string]safetensors.Tensor{"a": {DType: safetensors.F32, Data: make([]byte, 4)}, "b": {DType: safetensors.I16, Data: []byte{1, 0}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := safetensors.LoadTensors(bad); err == nil || !strings.Contains(err.Error(), `tensor "b"`) {
		t.Errorf("LoadTensors of an I16 tensor: error %v", err)
	}
}
