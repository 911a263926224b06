package tensor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/flockml/flock/backend"
)

// describe formats operands for error messages: "float32[2 3]@cpu".
func describe(ts ...*Tensor) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		if t == nil || t.st == nil {
			parts[i] = "<released>"
			continue
		}
		parts[i] = fmt.Sprintf("%v%v@%s", t.dtype, t.shape, t.st.dev.Name())
	}
	return strings.Join(parts, ", ")
}

// sameDevice panics unless every operand lives on one device.
func sameDevice(op string, ts ...*Tensor) Device {
	dev := ts[0].Device()
	for _, t := range ts[1:] {
		if t.Device() != dev {
			panic(fmt.Sprintf("tensor: %s: operands on different devices (%s); move them with To", op, describe(ts...)))
		}
	}
	return dev
}

// sameDType panics unless every operand has one dtype.
func sameDType(op string, ts ...*Tensor) DType {
	dt := ts[0].dtype
	for _, t := range ts[1:] {
		if t.dtype != dt {
			panic(fmt.Sprintf("tensor: %s: operands of different dtypes (%s); convert them with Cast", op, describe(ts...)))
		}
	}
	return dt
}

// floatOnly panics unless dt is Float32 or Float64.
func floatOnly(op string, ts ...*Tensor) {
	for _, t := range ts {
		if t.dtype != Float32 && t.dtype != Float64 {
			panic(fmt.Sprintf("tensor: %s: needs float32 or float64 operands, got %s", op, describe(ts...)))
		}
	}
}

// must panics with op's name and operands when a kernel reports an error:
// with an error value wrapping it when the device ran out of memory, which
// a caller may turn into a message, with a string otherwise.
func must(op string, err error, ts ...*Tensor) {
	if err == nil {
		return
	}
	if errors.Is(err, backend.ErrOutOfMemory) {
		// An error value, so that a caller can tell it from a bug and
		// stop with a message (job.Run does).
		panic(fmt.Errorf("tensor: %s(%s): %w", op, describe(ts...), err))
	}
	panic(fmt.Sprintf("tensor: %s(%s): %v", op, describe(ts...), err))
}

// Check is sameDevice and sameDType for packages built on tensor: it panics,
// naming op and the operands, unless all share a device and a dtype.
func Check(op string, ts ...*Tensor) {
	sameDevice(op, ts...)
	sameDType(op, ts...)
}

// Must panics with a message naming op and the operands when err is not nil.
// Packages that call backend kernels directly use it to report kernel
// errors the way tensor does.
func Must(op string, err error, ts ...*Tensor) { must(op, err, ts...) }
