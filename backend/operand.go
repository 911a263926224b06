package backend

import "fmt"

// Operand checks that every backend makes of a kernel's arguments, so that
// the backends agree on what they accept and say the same when they refuse.
// kernel names the kernel with the backend's prefix ("cpu: layer_norm") for
// the messages. check, where a function takes one, is the backend's own
// check of each operand present (that its buffer is the backend's and holds
// the view), made before the others; nil skips it.

// OperandCheck is a backend's own check of the operand called name.
type OperandCheck func(name string, v View) error

// CheckFloat checks that dt is a dtype the float kernels compute in.
func CheckFloat(kernel string, dt DType) error {
	if dt != Float32 && dt != Float64 {
		return fmt.Errorf("%s: dtype %v, want float32 or float64", kernel, dt)
	}
	return nil
}

// CheckDense checks a required operand: present, passing check, of dtype
// dt, of the given shape (any shape when shape is nil) and contiguous.
func CheckDense(kernel string, check OperandCheck, name string, v View, dt DType, shape Shape) error {
	if v.IsZero() {
		return fmt.Errorf("%s: %s is missing", kernel, name)
	}
	if check != nil {
		if err := check(name, v); err != nil {
			return err
		}
	}
	if v.DType != dt {
		return fmt.Errorf("%s: %s is %v, want %v", kernel, name, v.DType, dt)
	}
	if shape != nil && !v.Shape.Equal(shape) {
		return fmt.Errorf("%s: %s has shape %v, want %v", kernel, name, v.Shape, shape)
	}
	if !v.IsContiguous() {
		return fmt.Errorf("%s: %s (shape %v, strides %v) is not contiguous", kernel, name, v.Shape, v.Strides)
	}
	return nil
}

// CheckVector checks an optional per-channel or per-group operand: absent
// (the zero View), or passing check, of dtype dt, holding n elements in any
// shape, and contiguous.
func CheckVector(kernel string, check OperandCheck, name string, v View, dt DType, n int) error {
	if v.IsZero() {
		return nil
	}
	if check != nil {
		if err := check(name, v); err != nil {
			return err
		}
	}
	if v.DType != dt {
		return fmt.Errorf("%s: %s is %v, want %v", kernel, name, v.DType, dt)
	}
	if v.NumElements() != n {
		return fmt.Errorf("%s: %s has shape %v, want %d elements", kernel, name, v.Shape, n)
	}
	if !v.IsContiguous() {
		return fmt.Errorf("%s: %s (shape %v, strides %v) is not contiguous", kernel, name, v.Shape, v.Strides)
	}
	return nil
}

// namedView is an operand and its name in messages.
type namedView struct {
	name string
	v    View
}

// checkVectors applies CheckVector to each of vs, all of n elements.
func checkVectors(kernel string, check OperandCheck, dt DType, n int, vs ...namedView) error {
	for _, a := range vs {
		if err := CheckVector(kernel, check, a.name, a.v, dt, n); err != nil {
			return err
		}
	}
	return nil
}
