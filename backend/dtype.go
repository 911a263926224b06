package backend

import "fmt"

// DType is the element type of a buffer's contents.
type DType uint8

// The element types flock knows. Float16 and BFloat16 are storage types: the
// CPU backend converts them with Copy but computes in Float32.
const (
	Invalid DType = iota
	Float32
	Float64
	Float16
	BFloat16
	Int32
	Int64
	Uint8
	Bool
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	Invalid:  {"invalid", 0},
	Float32:  {"float32", 4},
	Float64:  {"float64", 8},
	Float16:  {"float16", 2},
	BFloat16: {"bfloat16", 2},
	Int32:    {"int32", 4},
	Int64:    {"int64", 8},
	Uint8:    {"uint8", 1},
	Bool:     {"bool", 1},
}

// Size is the number of bytes of one element.
func (d DType) Size() int {
	if int(d) >= len(dtypeInfo) {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns PyTorch's name for the type ("float32", "int64", ...).
func (d DType) String() string {
	if int(d) >= len(dtypeInfo) {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

// IsInt reports whether d is an integer type (Bool excluded).
func (d DType) IsInt() bool { return d == Int32 || d == Int64 || d == Uint8 }

// ParseDType returns the DType named s (PyTorch's names).
func ParseDType(s string) (DType, error) {
	for d := Float32; int(d) < len(dtypeInfo); d++ {
		if dtypeInfo[d].name == s {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("backend: unknown dtype %q", s)
}
