package safetensors

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// DType is an element type as the header names it ("F32", "BF16", ...).
type DType string

// The element types of the format, in the reference implementation's order
// of increasing alignment. Values are little-endian; BOOL is one byte, 0 or 1.
const (
	BOOL   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
)

var dtypes = [...]struct {
	name  DType
	size  int
	flock backend.DType
}{
	{BOOL, 1, backend.Bool},
	{U8, 1, backend.Uint8},
	{I8, 1, backend.Invalid},
	{F8E5M2, 1, backend.Invalid},
	{F8E4M3, 1, backend.Invalid},
	{I16, 2, backend.Invalid},
	{U16, 2, backend.Invalid},
	{F16, 2, backend.Float16},
	{BF16, 2, backend.BFloat16},
	{I32, 4, backend.Int32},
	{U32, 4, backend.Invalid},
	{F32, 4, backend.Float32},
	{F64, 8, backend.Float64},
	{I64, 8, backend.Int64},
	{U64, 8, backend.Invalid},
}

// rank is d's position in the reference order, or -1 for an unknown type.
func (d DType) rank() int {
	for i, e := range dtypes {
		if e.name == d {
			return i
		}
	}
	return -1
}

// Size is the number of bytes of one element, 0 for an unknown type.
func (d DType) Size() int {
	if r := d.rank(); r >= 0 {
		return dtypes[r].size
	}
	return 0
}

// Valid reports whether d is one of the format's element types.
func (d DType) Valid() bool { return d.rank() >= 0 }

// Flock returns the flock dtype holding d's values, and false when flock has
// none (I8, I16, U16, U32, U64 and the 8-bit floats).
func (d DType) Flock() (backend.DType, bool) {
	if r := d.rank(); r >= 0 && dtypes[r].flock != backend.Invalid {
		return dtypes[r].flock, true
	}
	return backend.Invalid, false
}

// DTypeOf returns the format's name for a flock dtype.
func DTypeOf(dt backend.DType) (DType, error) {
	for _, e := range dtypes {
		if e.flock == dt && dt != backend.Invalid {
			return e.name, nil
		}
	}
	return "", fmt.Errorf("safetensors: no element type for dtype %v", dt)
}
