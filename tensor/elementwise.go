package tensor

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// broadcastRaw returns t's layout expanded to shape under NumPy's rules
// (stride 0 on new and stretched axes), without taking a reference.
func (t *Tensor) broadcastRaw(op string, shape Shape) backend.View {
	v := t.Raw()
	if v.Shape.Equal(shape) {
		return v
	}
	lead := len(shape) - len(v.Shape)
	if lead < 0 {
		panic(fmt.Sprintf("tensor: %s: cannot broadcast %v to the lower-rank %v", op, v.Shape, shape))
	}
	st := make([]int, len(shape))
	for i := lead; i < len(shape); i++ {
		switch d := v.Shape[i-lead]; {
		case d == shape[i]:
			st[i] = v.Strides[i-lead]
		case d == 1:
		default:
			panic(fmt.Sprintf("tensor: %s: cannot broadcast %v to %v", op, v.Shape, shape))
		}
	}
	v.Shape, v.Strides = shape, st
	return v
}

// broadcastShape returns the shape that ts broadcast to, panicking with op's
// name when they do not.
func broadcastShape(op string, ts ...*Tensor) Shape {
	s := ts[0].shape
	for _, t := range ts[1:] {
		var err error
		if s, err = backend.BroadcastShapes(s, t.shape); err != nil {
			panic(fmt.Sprintf("tensor: %s: shapes do not broadcast (%s)", op, describe(ts...)))
		}
	}
	return s.Clone()
}

// intOrFloat panics unless t's dtype is Float32, Float64, Int32 or Int64.
func intOrFloat(op string, ts ...*Tensor) {
	for _, t := range ts {
		switch t.dtype {
		case Float32, Float64, Int32, Int64:
		default:
			panic(fmt.Sprintf("tensor: %s: needs float32, float64, int32 or int64 operands, got %s", op, describe(ts...)))
		}
	}
}

func (t *Tensor) unary(op backend.UnaryOp, name string, arg float64, ints bool) *Tensor {
	dev := t.Device()
	if ints {
		intOrFloat(name, t)
	} else {
		floatOnly(name, t)
	}
	out := empty(dev, t.dtype, t.shape)
	must(name, dev.Unary(op, out.Raw(), t.Raw(), arg), t)
	return out
}

// Neg returns −t.
func (t *Tensor) Neg() *Tensor { return t.unary(backend.Neg, "Neg", 0, true) }

// Exp returns eᵗ.
func (t *Tensor) Exp() *Tensor { return t.unary(backend.Exp, "Exp", 0, false) }

// Log returns the natural logarithm of t.
func (t *Tensor) Log() *Tensor { return t.unary(backend.Log, "Log", 0, false) }

// Sqrt returns √t.
func (t *Tensor) Sqrt() *Tensor { return t.unary(backend.Sqrt, "Sqrt", 0, false) }

// Rsqrt returns 1/√t.
func (t *Tensor) Rsqrt() *Tensor { return t.unary(backend.Rsqrt, "Rsqrt", 0, false) }

// Tanh returns tanh(t).
func (t *Tensor) Tanh() *Tensor { return t.unary(backend.Tanh, "Tanh", 0, false) }

// Sigmoid returns 1/(1+e⁻ᵗ).
func (t *Tensor) Sigmoid() *Tensor { return t.unary(backend.Sigmoid, "Sigmoid", 0, false) }

// ReLU returns max(t, 0).
func (t *Tensor) ReLU() *Tensor { return t.unary(backend.ReLU, "ReLU", 0, true) }

// GELU returns t·Φ(t) = t/2·(1+erf(t/√2)).
func (t *Tensor) GELU() *Tensor { return t.unary(backend.GELU, "GELU", 0, false) }

// GELUTanh returns the tanh approximation of GELU,
// t/2·(1+tanh(√(2/π)·(t+0.044715t³))).
func (t *Tensor) GELUTanh() *Tensor { return t.unary(backend.GELUTanh, "GELUTanh", 0, false) }

// Abs returns |t|.
func (t *Tensor) Abs() *Tensor { return t.unary(backend.Abs, "Abs", 0, true) }

// Sign returns −1, 0 or 1 by the sign of each element.
func (t *Tensor) Sign() *Tensor { return t.unary(backend.Sign, "Sign", 0, true) }

// Erf returns the error function of t.
func (t *Tensor) Erf() *Tensor { return t.unary(backend.Erf, "Erf", 0, false) }

// Reciprocal returns 1/t.
func (t *Tensor) Reciprocal() *Tensor { return t.unary(backend.Reciprocal, "Reciprocal", 0, false) }

// Square returns t².
func (t *Tensor) Square() *Tensor { return t.unary(backend.Square, "Square", 0, true) }

// PowScalar returns tᵖ.
func (t *Tensor) PowScalar(p float64) *Tensor {
	return t.unary(backend.PowScalar, "PowScalar", p, false)
}

// AddScalar returns t + s.
func (t *Tensor) AddScalar(s float64) *Tensor {
	return t.unary(backend.AddScalar, "AddScalar", s, false)
}

// MulScalar returns t·s.
func (t *Tensor) MulScalar(s float64) *Tensor {
	return t.unary(backend.MulScalar, "MulScalar", s, false)
}

var binaryNames = [...]string{
	backend.Add: "Add", backend.Sub: "Sub", backend.Mul: "Mul", backend.Div: "Div",
	backend.Maximum: "Maximum", backend.Minimum: "Minimum", backend.Pow: "Pow",
	backend.Eq: "Eq", backend.Ne: "Ne", backend.Lt: "Lt", backend.Le: "Le", backend.Gt: "Gt", backend.Ge: "Ge",
}

func binaryOperands(op backend.BinaryOp, a, b *Tensor) (Device, string) {
	name := binaryNames[op]
	dev := sameDevice(name, a, b)
	sameDType(name, a, b)
	if op == backend.Div || op == backend.Pow {
		floatOnly(name, a, b)
	} else {
		intOrFloat(name, a, b)
	}
	return dev, name
}

func binary(op backend.BinaryOp, a, b *Tensor) *Tensor {
	dev, name := binaryOperands(op, a, b)
	shape := broadcastShape(name, a, b)
	dt := a.dtype
	if op.IsComparison() {
		dt = Bool
	}
	out := empty(dev, dt, shape)
	must(name, dev.Binary(op, out.Raw(), a.broadcastRaw(name, shape), b.broadcastRaw(name, shape)), a, b)
	return out
}

// Add returns t + b, broadcasting as NumPy does.
func (t *Tensor) Add(b *Tensor) *Tensor { return binary(backend.Add, t, b) }

// Sub returns t − b (broadcasting).
func (t *Tensor) Sub(b *Tensor) *Tensor { return binary(backend.Sub, t, b) }

// Mul returns t·b elementwise (broadcasting).
func (t *Tensor) Mul(b *Tensor) *Tensor { return binary(backend.Mul, t, b) }

// Div returns t/b (broadcasting; floats only).
func (t *Tensor) Div(b *Tensor) *Tensor { return binary(backend.Div, t, b) }

// Maximum returns the elementwise maximum of t and b (broadcasting; NaN
// propagates).
func (t *Tensor) Maximum(b *Tensor) *Tensor { return binary(backend.Maximum, t, b) }

// Minimum returns the elementwise minimum of t and b (broadcasting; NaN
// propagates).
func (t *Tensor) Minimum(b *Tensor) *Tensor { return binary(backend.Minimum, t, b) }

// Pow returns tᵇ elementwise (broadcasting; floats only).
func (t *Tensor) Pow(b *Tensor) *Tensor { return binary(backend.Pow, t, b) }

// Eq returns the Bool tensor t = b (broadcasting).
func (t *Tensor) Eq(b *Tensor) *Tensor { return binary(backend.Eq, t, b) }

// Ne returns the Bool tensor t ≠ b (broadcasting).
func (t *Tensor) Ne(b *Tensor) *Tensor { return binary(backend.Ne, t, b) }

// Lt returns the Bool tensor t < b (broadcasting).
func (t *Tensor) Lt(b *Tensor) *Tensor { return binary(backend.Lt, t, b) }

// Le returns the Bool tensor t ≤ b (broadcasting).
func (t *Tensor) Le(b *Tensor) *Tensor { return binary(backend.Le, t, b) }

// Gt returns the Bool tensor t > b (broadcasting).
func (t *Tensor) Gt(b *Tensor) *Tensor { return binary(backend.Gt, t, b) }

// Ge returns the Bool tensor t ≥ b (broadcasting).
func (t *Tensor) Ge(b *Tensor) *Tensor { return binary(backend.Ge, t, b) }

// Where returns cond ? a : b elementwise, with cond Bool and the three
// broadcast together.
func Where(cond, a, b *Tensor) *Tensor {
	dev := sameDevice("Where", cond, a, b)
	sameDType("Where", a, b)
	if cond.dtype != Bool {
		panic(fmt.Sprintf("tensor: Where: condition must be bool (%s)", describe(cond, a, b)))
	}
	shape := broadcastShape("Where", cond, a, b)
	out := empty(dev, a.dtype, shape)
	must("Where", dev.Where(out.Raw(), cond.broadcastRaw("Where", shape), a.broadcastRaw("Where", shape), b.broadcastRaw("Where", shape)), cond, a, b)
	return out
}

// writable panics unless t can be updated in place: no two of its elements
// share memory.
func (t *Tensor) writable(op string) {
	for i, s := range t.strides {
		if s == 0 && t.shape[i] > 1 {
			panic(fmt.Sprintf("tensor: %s: cannot write in place to a broadcast tensor (shape %v, strides %v); Clone it first", op, t.shape, t.strides))
		}
	}
}

// sameLayout reports whether views u and v address the same elements in the
// same order.
func sameLayout(u, v backend.View) bool {
	if u.Buf != v.Buf || u.Offset != v.Offset || !u.Shape.Equal(v.Shape) {
		return false
	}
	for i := range u.Strides {
		if u.Strides[i] != v.Strides[i] && u.Shape[i] > 1 {
			return false
		}
	}
	return true
}

func (t *Tensor) binaryInPlace(op backend.BinaryOp, b *Tensor) {
	dev, name := binaryOperands(op, t, b)
	name += "InPlace"
	t.writable(name)
	if s := broadcastShape(name, t, b); !s.Equal(t.shape) {
		panic(fmt.Sprintf("tensor: %s: operand %v does not broadcast to the updated tensor's shape %v", name, b.shape, t.shape))
	}
	bv := b.broadcastRaw(name, t.shape)
	if t.SharesStorage(b) && !sameLayout(t.Raw(), bv) {
		// A partly overlapping operand would be overwritten while read.
		c := b.Clone()
		defer c.Release()
		bv = c.broadcastRaw(name, t.shape)
	}
	must(name, dev.Binary(op, t.Raw(), t.Raw(), bv), t, b)
}

// AddInPlace sets t += b, with b broadcast to t's shape.
func (t *Tensor) AddInPlace(b *Tensor) { t.binaryInPlace(backend.Add, b) }

// SubInPlace sets t −= b, with b broadcast to t's shape.
func (t *Tensor) SubInPlace(b *Tensor) { t.binaryInPlace(backend.Sub, b) }

// MulInPlace sets t ·= b, with b broadcast to t's shape.
func (t *Tensor) MulInPlace(b *Tensor) { t.binaryInPlace(backend.Mul, b) }

// DivInPlace sets t /= b, with b broadcast to t's shape.
func (t *Tensor) DivInPlace(b *Tensor) { t.binaryInPlace(backend.Div, b) }

func (t *Tensor) unaryInPlace(op backend.UnaryOp, name string, arg float64) {
	t.live()
	floatOnly(name, t)
	t.writable(name)
	must(name, t.Device().Unary(op, t.Raw(), t.Raw(), arg), t)
}

// MulScalarInPlace sets t ·= s.
func (t *Tensor) MulScalarInPlace(s float64) {
	t.unaryInPlace(backend.MulScalar, "MulScalarInPlace", s)
}

// AddScalarInPlace sets t += s.
func (t *Tensor) AddScalarInPlace(s float64) {
	t.unaryInPlace(backend.AddScalar, "AddScalarInPlace", s)
}

// AddScaledInPlace sets t += α·b, with b broadcast to t's shape.
func (t *Tensor) AddScaledInPlace(alpha float64, b *Tensor) {
	switch alpha {
	case 1:
		t.AddInPlace(b)
	case -1:
		t.SubInPlace(b)
	default:
		sameDevice("AddScaledInPlace", t, b)
		sameDType("AddScaledInPlace", t, b)
		floatOnly("AddScaledInPlace", t, b)
		s := b.MulScalar(alpha)
		defer s.Release()
		t.AddInPlace(s)
	}
}
