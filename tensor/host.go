package tensor

import (
	"fmt"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// To returns t on device dev: t itself (a new reference) when it is already
// there, otherwise a contiguous copy.
func (t *Tensor) To(dev Device) *Tensor {
	if t.Device() == dev {
		return t.Retain()
	}
	src := t.Contiguous()
	defer src.Release()
	out := empty(dev, t.dtype, t.shape)
	nb := t.NumElements() * t.dtype.Size()
	if hb, ok := src.st.buf.(backend.HostBuffer); ok {
		off := src.offset * t.dtype.Size()
		must("To", dev.Write(out.st.buf, 0, hb.Bytes()[off:off+nb]), t)
		return out
	}
	host := make([]byte, nb)
	must("To", t.Device().Read(host, src.st.buf, src.offset*t.dtype.Size()), t)
	must("To", dev.Write(out.st.buf, 0, host), t)
	return out
}

// MoveTo moves t to device dev in place: its storage becomes a contiguous
// copy on dev and t lets go of the old one, so that whoever holds this
// *Tensor (a module's field and its registered buffer alike) finds it
// there. Views of t made before keep the old storage. Nothing happens
// when t is on dev already.
func (t *Tensor) MoveTo(dev Device) {
	if t.Device() == dev {
		return
	}
	moved := t.To(dev)
	old := t.st
	t.st, t.strides, t.offset = moved.st, moved.strides, moved.offset
	moved.st = nil // t holds its reference now
	old.release()
}

// ToSlice returns t's elements in row-major order, converted to T.
func ToSlice[T Elem](t *Tensor) []T {
	out := make([]T, t.NumElements())
	if len(out) == 0 {
		return out
	}
	dt := DTypeOf[T]()
	src := t
	if t.dtype != dt || !t.IsContiguous() {
		src = t.Cast(dt)
		defer src.Release()
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(out)*dt.Size())
	must("ToSlice", src.Device().Read(b, src.st.buf, src.offset*dt.Size()), t)
	return out
}

// Float32s returns t's elements as float32s in row-major order.
func (t *Tensor) Float32s() []float32 { return ToSlice[float32](t) }

// Float64s returns t's elements as float64s in row-major order.
func (t *Tensor) Float64s() []float64 { return ToSlice[float64](t) }

// Int64s returns t's elements as int64s in row-major order.
func (t *Tensor) Int64s() []int64 { return ToSlice[int64](t) }

// Bools returns t's elements as bools in row-major order.
func (t *Tensor) Bools() []bool { return ToSlice[bool](t) }

// Item returns the value of a one-element tensor.
func (t *Tensor) Item() float64 {
	if t.NumElements() != 1 {
		panic(fmt.Sprintf("tensor: Item: tensor of shape %v has %d elements, not 1", t.shape, t.NumElements()))
	}
	return ToSlice[float64](t)[0]
}

// At returns the element at the given index (one entry per axis, negatives
// count from the end).
func (t *Tensor) At(index ...int) float64 {
	if len(index) != t.Dim() {
		panic(fmt.Sprintf("tensor: At: %d indices for shape %v", len(index), t.shape))
	}
	off := t.offset
	for a, i := range index {
		n := t.shape[a]
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			panic(fmt.Sprintf("tensor: At: index %v out of range for shape %v", index, t.shape))
		}
		off += i * t.strides[a]
	}
	e := t.view(Shape{}, []int{}, off)
	defer e.Release()
	return e.Item()
}

// HostFloat32s returns the elements of a contiguous float32 tensor in host
// memory in place: writes to the slice are writes to t. ok is false for any
// other tensor (another dtype or device, a strided view, no elements).
func HostFloat32s(t *Tensor) (s []float32, ok bool) {
	hb, isHost := t.st.buf.(backend.HostBuffer)
	n := t.NumElements()
	if !isHost || t.dtype != Float32 || !t.IsContiguous() || n == 0 {
		return nil, false
	}
	b := hb.Bytes()
	if (t.offset+n)*4 > len(b) {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[t.offset*4])), n), true
}
