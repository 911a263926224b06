package ffcv

import (
	"fmt"
	"unsafe"

	"github.com/flockml/flock/tensor"
)

// Column is one field of a Batch: the values of the batch's samples as one
// array whose first axis is the batch. Its memory belongs to a slot of the
// Loader's ring and is valid until the Batch is released.
type Column struct {
	// Name is the field's name in the file.
	Name string
	// DType is the element type: Uint8 (images before Normalize, uint8
	// arrays), Float32 (after Normalize, float32 arrays), BFloat16 (after
	// Normalize to bfloat16), Int64 (int fields), Float64 (float fields),
	// Int32; zero for bytes and JSON fields, whose values are in Bytes.
	DType tensor.DType
	// Shape is the array's shape, batch axis first: [B, H, W, C] for
	// images (NHWC), [B, C, H, W] after Normalize or ToCHW, [B, 1] for
	// ints and floats ([B] after Squeeze), [B, dims…] for arrays.
	Shape []int
	// Bytes holds the values of bytes and JSON fields, one slice per
	// sample, aliasing the file's memory (read-only).
	Bytes [][]byte
	// Pair and Lambda are set by the mixup transforms: sample b was mixed
	// as Lambda[b]·(sample b) + (1 − Lambda[b])·(sample Pair[b]) of the
	// batch, so a label column's mixed loss is
	// Lambda[b]·loss(label b) + (1 − Lambda[b])·loss(label Pair[b]).
	Pair   []int
	Lambda []float32

	raw   []byte // len = B·rowBytes for the slot's full batch size
	shape []int  // backing array of Shape
}

// newColumn allocates a column of b rows of the given element type and row
// shape (without the batch axis), 8-byte aligned.
func newColumn(name string, dt tensor.DType, row []int, b int) *Column {
	c := &Column{Name: name, DType: dt}
	c.shape = append([]int{b}, row...)
	c.Shape = c.shape
	if dt == 0 {
		c.Bytes = make([][]byte, b)
		return c
	}
	n := b * dt.Size()
	for _, d := range row {
		n *= d
	}
	words := make([]uint64, (n+7)/8)
	if len(words) > 0 {
		c.raw = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	}
	return c
}

// setRows sets the batch axis to n ≤ the slot's batch size.
func (c *Column) setRows(n int) {
	c.shape[0] = n
	c.Shape = c.shape
}

// rowBytes returns the size of one sample's value in bytes.
func (c *Column) rowBytes() int {
	n := c.DType.Size()
	for _, d := range c.shape[1:] {
		n *= d
	}
	return n
}

// Raw returns the column's bytes (native byte order) for the batch's rows.
func (c *Column) Raw() []byte {
	return c.raw[:c.shape[0]*c.rowBytes()]
}

func view[T any](c *Column, want tensor.DType, op string) []T {
	if c.DType != want {
		panic(fmt.Sprintf("ffcv: Column.%s: column %q holds %v", op, c.Name, c.DType))
	}
	b := c.Raw()
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}

// Uint8s returns the values of a Uint8 column; it panics for another dtype.
func (c *Column) Uint8s() []uint8 { return view[uint8](c, tensor.Uint8, "Uint8s") }

// Float32s returns the values of a Float32 column.
func (c *Column) Float32s() []float32 { return view[float32](c, tensor.Float32, "Float32s") }

// Float64s returns the values of a Float64 column.
func (c *Column) Float64s() []float64 { return view[float64](c, tensor.Float64, "Float64s") }

// Int64s returns the values of an Int64 column.
func (c *Column) Int64s() []int64 { return view[int64](c, tensor.Int64, "Int64s") }

// BFloat16s returns the bit patterns of a BFloat16 column.
func (c *Column) BFloat16s() []uint16 { return view[uint16](c, tensor.BFloat16, "BFloat16s") }

// Int32s returns the values of an Int32 column.
func (c *Column) Int32s() []int32 { return view[int32](c, tensor.Int32, "Int32s") }

// Tensor copies the column into a new tensor of its dtype and shape; the
// options choose the device (tensor.On) or convert the dtype (tensor.Of;
// ignored for BFloat16 columns). The tensor outlives the batch. It panics
// for bytes and JSON columns.
func (c *Column) Tensor(opts ...tensor.Option) *tensor.Tensor {
	shape := tensor.Shape(append([]int(nil), c.Shape...))
	switch c.DType {
	case tensor.Uint8:
		return tensor.FromSlice(c.Uint8s(), shape, opts...)
	case tensor.Float32:
		return tensor.FromSlice(c.Float32s(), shape, opts...)
	case tensor.Float64:
		return tensor.FromSlice(c.Float64s(), shape, opts...)
	case tensor.Int64:
		return tensor.FromSlice(c.Int64s(), shape, opts...)
	case tensor.Int32:
		return tensor.FromSlice(c.Int32s(), shape, opts...)
	case tensor.BFloat16:
		t := tensor.Empty(shape, append(opts, tensor.Of(tensor.BFloat16))...)
		if err := t.Device().Write(t.Raw().Buf, 0, c.Raw()); err != nil {
			t.Release()
			panic(fmt.Sprintf("ffcv: Column.Tensor: column %q: %v", c.Name, err))
		}
		return t
	}
	panic(fmt.Sprintf("ffcv: Column.Tensor: column %q holds no array", c.Name))
}

// f32 views b (4-byte aligned, as column rows are) as float32 values.
func f32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
