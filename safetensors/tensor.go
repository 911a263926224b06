package safetensors

import (
	"encoding/binary"
	"fmt"

	"github.com/flockml/flock/tensor"
)

// littleEndian reports whether the host stores numbers as the format does,
// so that bytes move between files and host memory without swapping.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// swapBytes reverses the byte order of each size-byte element of b in place.
func swapBytes(b []byte, size int) {
	if size == 1 {
		return
	}
	for i := 0; i+size <= len(b); i += size {
		for j, k := i, i+size-1; j < k; j, k = j+1, k-1 {
			b[j], b[k] = b[k], b[j]
		}
	}
}

// FromTensor copies t's elements (from any device, in any layout) into a
// Tensor of the matching element type. It panics if t is released or the
// device cannot be read, as tensor's own accessors do.
func FromTensor(t *tensor.Tensor) Tensor {
	dt, err := DTypeOf(t.DType())
	if err != nil {
		panic(fmt.Sprintf("safetensors: FromTensor: %v", err))
	}
	c := t.Contiguous()
	defer c.Release()
	size := t.DType().Size()
	data := make([]byte, c.NumElements()*size)
	if len(data) > 0 {
		raw := c.Raw()
		tensor.Must("safetensors.FromTensor", c.Device().Read(data, raw.Buf, raw.Offset*size), t)
	}
	if !littleEndian {
		swapBytes(data, size)
	}
	return Tensor{DType: dt, Shape: append([]int{}, t.Shape()...), Data: data}
}

// ToTensor returns a new tensor holding t's values. Options choose the device
// (tensor.On) and convert to another dtype (tensor.Of); by default the tensor
// has t's element type on the default device. BOOL bytes other than 0 read as
// true. Element types that flock lacks, and tensors whose Data does not match
// their shape, give an error.
func (t Tensor) ToTensor(opts ...tensor.Option) (*tensor.Tensor, error) {
	dt, ok := t.DType.Flock()
	if !ok {
		return nil, fmt.Errorf("safetensors: element type %q has no flock dtype", t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return nil, fmt.Errorf("safetensors: negative extent in shape %v", t.Shape)
		}
	}
	if n := t.NumElements() * dt.Size(); len(t.Data) != n {
		return nil, fmt.Errorf("safetensors: %d bytes of data for %s%v, which needs %d", len(t.Data), t.DType, t.Shape, n)
	}
	// The options decide the device and the final dtype; a probe of no
	// elements reads them back.
	probe := tensor.Empty(tensor.Shape{0}, append([]tensor.Option{tensor.Of(dt)}, opts...)...)
	dev, want := probe.Device(), probe.DType()
	probe.Release()

	out := tensor.Empty(tensor.Shape(append([]int{}, t.Shape...)), tensor.Of(dt), tensor.On(dev))
	data := t.Data
	if dt == tensor.Bool || !littleEndian {
		data = append([]byte(nil), data...)
		if dt == tensor.Bool {
			for i, b := range data {
				if b != 0 {
					data[i] = 1
				}
			}
		}
		if !littleEndian {
			swapBytes(data, dt.Size())
		}
	}
	if len(data) > 0 {
		if err := dev.Write(out.Raw().Buf, 0, data); err != nil {
			out.Release()
			return nil, fmt.Errorf("safetensors: copy to %s: %w", dev.Name(), err)
		}
	}
	if want != dt {
		defer out.Release()
		return out.Cast(want), nil
	}
	return out, nil
}

// LoadTensors reads the file at path into new tensors, which the caller
// releases; opts apply to each as in Tensor.ToTensor.
func LoadTensors(path string, opts ...tensor.Option) (map[string]*tensor.Tensor, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*tensor.Tensor, len(f.Tensors))
	for _, name := range f.Names() {
		t, err := f.Tensors[name].ToTensor(opts...)
		if err != nil {
			for _, u := range out {
				u.Release()
			}
			return nil, fmt.Errorf("%w (tensor %q of %s)", err, name, path)
		}
		out[name] = t
	}
	return out, nil
}

// SaveTensors writes tensors and metadata to path atomically (see WriteFile).
func SaveTensors(path string, tensors map[string]*tensor.Tensor, metadata map[string]string) error {
	raw := make(map[string]Tensor, len(tensors))
	for name, t := range tensors {
		raw[name] = FromTensor(t)
	}
	return WriteFile(path, raw, metadata)
}
