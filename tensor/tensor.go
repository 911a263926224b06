package tensor

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

// Re-exported names, so that most code needs only this package.
type (
	// DType is the element type.
	DType = backend.DType
	// Shape is the extent of each axis.
	Shape = backend.Shape
	// Device is a backend: where a tensor's storage lives and its ops run.
	Device = backend.Backend
)

// Element types.
const (
	Float32  = backend.Float32
	Float64  = backend.Float64
	Float16  = backend.Float16
	BFloat16 = backend.BFloat16
	Int32    = backend.Int32
	Int64    = backend.Int64
	Uint8    = backend.Uint8
	Bool     = backend.Bool
)

// storage is a buffer shared by a tensor and its views, freed when the last
// of them is released.
type storage struct {
	buf     backend.Buffer
	dev     Device
	refs    atomic.Int32
	cleanup runtime.Cleanup
}

// Tensor is an n-dimensional array: a dtype, a shape, strides and an element
// offset into refcounted storage on a device. Views (Reshape, Slice,
// Transpose, Expand, ...) share storage; each Tensor value holds one
// reference, dropped by Release.
type Tensor struct {
	st      *storage
	dtype   DType
	shape   Shape
	strides []int
	offset  int
}

var defaultDevice atomic.Pointer[Device]

func init() {
	var d Device = cpu.Default()
	defaultDevice.Store(&d)
}

// DefaultDevice is where creation functions place tensors when no On option
// is given: the CPU backend unless SetDefaultDevice changed it.
func DefaultDevice() Device { return *defaultDevice.Load() }

// SetDefaultDevice changes the default device for later creations.
func SetDefaultDevice(d Device) { defaultDevice.Store(&d) }

func newStorage(dev Device, nbytes int) *storage {
	buf, err := dev.Alloc(nbytes)
	if err != nil {
		panic(fmt.Sprintf("tensor: alloc %d bytes on %s: %v", nbytes, dev.Name(), err))
	}
	st := &storage{buf: buf, dev: dev}
	st.refs.Store(1)
	// A tensor that is dropped without Release still returns its memory to
	// the device once the garbage collector finds it unreachable.
	st.cleanup = runtime.AddCleanup(st, func(b backend.Buffer) { b.Backend().Free(b) }, buf)
	return st
}

func (s *storage) retain() *storage {
	if s.refs.Add(1) <= 1 {
		panic("tensor: use of a released tensor")
	}
	return s
}

func (s *storage) release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		s.cleanup.Stop()
		s.dev.Free(s.buf)
		s.buf = nil
	case n < 0:
		panic("tensor: storage released more often than retained")
	}
}

// empty allocates an uninitialised contiguous tensor.
func empty(dev Device, dt DType, shape Shape) *Tensor {
	if dt.Size() == 0 {
		panic(fmt.Sprintf("tensor: cannot allocate dtype %v", dt))
	}
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("tensor: negative extent in shape %v", shape))
		}
	}
	s := shape.Clone()
	return &Tensor{
		st:      newStorage(dev, s.NumElements()*dt.Size()),
		dtype:   dt,
		shape:   s,
		strides: backend.ContiguousStrides(s),
	}
}

// view returns a new Tensor over t's storage with the given layout.
func (t *Tensor) view(shape Shape, strides []int, offset int) *Tensor {
	return &Tensor{st: t.live().retain(), dtype: t.dtype, shape: shape, strides: strides, offset: offset}
}

func (t *Tensor) live() *storage {
	if t == nil {
		panic("tensor: nil tensor")
	}
	if t.st == nil {
		panic("tensor: use of a released tensor")
	}
	return t.st
}

// Release drops t's reference to its storage; the memory returns to the
// device when the last view of it is released. t must not be used afterwards.
// Releasing nil is a no-op.
func (t *Tensor) Release() {
	if t == nil || t.st == nil {
		return
	}
	st := t.st
	t.st = nil
	st.release()
}

// Released reports whether Release has been called on t.
func (t *Tensor) Released() bool { return t.st == nil }

// Retain returns a new Tensor sharing t's storage and layout, holding its own
// reference (release both).
func (t *Tensor) Retain() *Tensor { return t.view(t.shape, t.strides, t.offset) }

// Exclusive reports whether t holds the only reference to its storage, so
// that writing to it in place changes no other tensor.
func (t *Tensor) Exclusive() bool { return t.live().refs.Load() == 1 }

// DType is the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Shape is the extent of each axis. The caller must not modify it.
func (t *Tensor) Shape() Shape { return t.shape }

// Strides are the element strides of each axis. The caller must not modify
// them.
func (t *Tensor) Strides() []int { return t.strides }

// Offset is the element offset of t's first element in its storage.
func (t *Tensor) Offset() int { return t.offset }

// Dim is the number of axes.
func (t *Tensor) Dim() int { return len(t.shape) }

// Size is the extent of axis (negative counts from the end).
func (t *Tensor) Size(axis int) int { return t.shape[t.axis("Size", axis)] }

// NumElements is the number of elements.
func (t *Tensor) NumElements() int { return t.shape.NumElements() }

// Device is where t's storage lives.
func (t *Tensor) Device() Device { return t.live().dev }

// IsContiguous reports whether t is row-major without gaps.
func (t *Tensor) IsContiguous() bool { return t.Raw().IsContiguous() }

// Raw returns t's layout as a backend.View, for code that calls kernels
// directly. The view is valid while t is.
func (t *Tensor) Raw() backend.View {
	return backend.View{Buf: t.live().buf, DType: t.dtype, Shape: t.shape, Strides: t.strides, Offset: t.offset}
}

// SharesStorage reports whether t and u are views of the same memory.
func (t *Tensor) SharesStorage(u *Tensor) bool { return t.live() == u.live() }

// axis normalises a possibly negative axis, panicking with op's name when it
// is out of range.
func (t *Tensor) axis(op string, a int) int {
	r := len(t.shape)
	if a < 0 {
		a += r
	}
	if a < 0 || a >= r {
		panic(fmt.Sprintf("tensor: %s: axis %d out of range for shape %v", op, a, t.shape))
	}
	return a
}

// Axis normalises a possibly negative axis of t (−1 is the last), panicking
// with op's name in the message when it is out of range.
func (t *Tensor) Axis(op string, a int) int { return t.axis(op, a) }
