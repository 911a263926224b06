package safetensors

import (
	"bytes"
	"testing"

	"github.com/flockml/flock/backend"
)

func TestSwapBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		size     int
		in, want []byte
	}{
		{1, []byte{1, 2, 3}, []byte{1, 2, 3}},
		{2, []byte{1, 2, 3, 4}, []byte{2, 1, 4, 3}},
		{4, []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{4, 3, 2, 1, 8, 7, 6, 5}},
		{8, []byte{1, 2, 3, 4, 5, 6, 7, 8}, []byte{8, 7, 6, 5, 4, 3, 2, 1}},
	}
	for _, tc := range tests {
		b := append([]byte{}, tc.in...)
		swapBytes(b, tc.size)
		if !bytes.Equal(b, tc.want) {
			t.Errorf("swapBytes(%v, %d) = %v, want %v", tc.in, tc.size, b, tc.want)
		}
	}
}

func TestDTypeMapping(t *testing.T) {
	t.Parallel()
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Float16, backend.BFloat16, backend.Int32, backend.Int64, backend.Uint8, backend.Bool} {
		s, err := DTypeOf(dt)
		if err != nil {
			t.Fatal(err)
		}
		back, ok := s.Flock()
		if !ok || back != dt || s.Size() != dt.Size() {
			t.Errorf("%v → %s → %v (size %d, want %d)", dt, s, back, s.Size(), dt.Size())
		}
	}
	if _, err := DTypeOf(backend.Invalid); err == nil {
		t.Error("DTypeOf(Invalid) succeeded")
	}
	for _, s := range []DType{I8, I16, U16, U32, U64, F8E4M3, F8E5M2} {
		if _, ok := s.Flock(); ok {
			t.Errorf("%s maps to a flock dtype", s)
		}
	}
	if DType("X").Size() != 0 || DType("X").Valid() {
		t.Error("unknown dtype reports a size")
	}
}
