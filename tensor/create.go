package tensor

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// Option configures a creation function.
type Option func(*config)

type config struct {
	dtype DType
	dev   Device
}

// Of selects the dtype of a created tensor (Float32 by default).
func Of(dt DType) Option { return func(c *config) { c.dtype = dt } }

// On selects the device of a created tensor (DefaultDevice by default).
func On(dev Device) Option { return func(c *config) { c.dev = dev } }

// configure applies opts. A dtype left unset stays backend.Invalid so that
// callers can tell; dtypeOr supplies their default.
func configure(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.dev == nil {
		c.dev = DefaultDevice()
	}
	return c
}

func (c config) dtypeOr(dt DType) DType {
	if c.dtype == backend.Invalid {
		return dt
	}
	return c.dtype
}

// Empty returns a tensor whose contents are unspecified.
func Empty(shape Shape, opts ...Option) *Tensor {
	c := configure(opts)
	return empty(c.dev, c.dtypeOr(Float32), shape)
}

// Full returns a tensor with every element v.
func Full(shape Shape, v float64, opts ...Option) *Tensor {
	t := Empty(shape, opts...)
	t.Fill(v)
	return t
}

// Zeros returns a tensor of zeros.
func Zeros(shape Shape, opts ...Option) *Tensor { return Full(shape, 0, opts...) }

// Ones returns a tensor of ones.
func Ones(shape Shape, opts ...Option) *Tensor { return Full(shape, 1, opts...) }

// Scalar returns a 0-dimensional tensor holding v.
func Scalar(v float64, opts ...Option) *Tensor { return Full(Shape{}, v, opts...) }

// EmptyLike, ZerosLike and FullLike create tensors of t's shape, dtype and
// device.
func EmptyLike(t *Tensor) *Tensor { return empty(t.Device(), t.dtype, t.shape) }

// ZerosLike returns zeros of t's shape, dtype and device.
func ZerosLike(t *Tensor) *Tensor { return FullLike(t, 0) }

// OnesLike returns ones of t's shape, dtype and device.
func OnesLike(t *Tensor) *Tensor { return FullLike(t, 1) }

// FullLike returns a tensor of t's shape, dtype and device filled with v.
func FullLike(t *Tensor, v float64) *Tensor {
	u := EmptyLike(t)
	u.Fill(v)
	return u
}

// Arange returns [start, start+step, ...) up to but excluding end, like
// torch.arange.
func Arange(start, end, step float64, opts ...Option) *Tensor {
	if step == 0 || math.IsNaN(start) || math.IsNaN(end) || math.IsNaN(step) {
		panic(fmt.Sprintf("tensor: Arange(%v, %v, %v): step must be non-zero and bounds finite", start, end, step))
	}
	n := int(math.Ceil((end - start) / step))
	if n < 0 {
		n = 0
	}
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = start + float64(i)*step
	}
	c := configure(opts)
	host := FromSlice(vals, Shape{n}, On(c.dev))
	defer host.Release()
	return host.Cast(c.dtypeOr(Float32))
}

// Elem is a Go type that maps onto a DType.
type Elem interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8 | ~bool
}

// DTypeOf returns the DType that holds values of Go type T.
func DTypeOf[T Elem]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int32:
		return Int32
	case int64:
		return Int64
	case uint8:
		return Uint8
	case bool:
		return Bool
	}
	panic(fmt.Sprintf("tensor: no dtype for %T", z))
}

// FromSlice returns a tensor of the given shape holding a copy of data (in
// row-major order) with T's dtype; an Of option converts to another dtype. A
// nil shape means a 1-D tensor of len(data) elements.
func FromSlice[T Elem](data []T, shape Shape, opts ...Option) *Tensor {
	if shape == nil {
		shape = Shape{len(data)}
	}
	if shape.NumElements() != len(data) {
		panic(fmt.Sprintf("tensor: FromSlice: %d values for shape %v (%d elements)", len(data), shape, shape.NumElements()))
	}
	c := configure(opts)
	dt := DTypeOf[T]()
	t := empty(c.dev, dt, shape)
	if len(data) > 0 {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*dt.Size())
		must("FromSlice", c.dev.Write(t.st.buf, 0, b), t)
	}
	if want := c.dtypeOr(dt); want != dt {
		defer t.Release()
		return t.Cast(want)
	}
	return t
}

// Fill sets every element of t to v, in place.
func (t *Tensor) Fill(v float64) {
	must("Fill", t.Device().Fill(t.Raw(), v), t)
}

// Cast returns t converted to dtype dt (a copy, even when dt is t's dtype).
func (t *Tensor) Cast(dt DType) *Tensor {
	out := empty(t.Device(), dt, t.shape)
	must("Cast", t.Device().Copy(out.Raw(), t.Raw()), t)
	return out
}

// Clone returns a contiguous copy of t.
func (t *Tensor) Clone() *Tensor { return t.Cast(t.dtype) }

// CopyFrom copies src into t elementwise, in place. src broadcasts to t's
// shape and is converted to t's dtype; it may live on another device when one
// of the two is host memory.
func (t *Tensor) CopyFrom(src *Tensor) {
	s := src
	if !src.shape.Equal(t.shape) {
		s = src.BroadcastTo(t.shape)
		defer s.Release()
	}
	if t.SharesStorage(s) {
		// Copy's operands must not overlap.
		s = s.Clone()
		defer s.Release()
	}
	must("CopyFrom", t.Device().Copy(t.Raw(), s.Raw()), t, src)
}

// Contiguous returns t itself (as a new reference) when it is row-major
// without gaps, and a contiguous copy otherwise.
func (t *Tensor) Contiguous() *Tensor {
	if t.IsContiguous() {
		return t.Retain()
	}
	return t.Clone()
}
