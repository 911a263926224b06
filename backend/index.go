package backend

import "fmt"

// The checks of the indexing kernels' shapes and dtypes, shared by the
// backends. The values of the index (in range along the axis) and the
// operands' buffers are each backend's to check. kernel names the kernel
// with the backend's prefix ("cpu: scatter_add") for the messages.

// checkIndexDType checks that index holds int32 or int64 positions.
func checkIndexDType(kernel string, index View) error {
	if index.DType != Int32 && index.DType != Int64 {
		return fmt.Errorf("%s: index is %v, want int32 or int64", kernel, index.DType)
	}
	return nil
}

// checkAxis checks that axis is one of v's, called name in the message.
func checkAxis(kernel, name string, v View, axis int) error {
	if axis < 0 || axis >= len(v.Shape) {
		return fmt.Errorf("%s: axis %d out of range for %s of shape %v", kernel, axis, name, v.Shape)
	}
	return nil
}

// checkIndexAlong checks a 1-D index of positions along axis of v (called
// name) and returns v's shape with that axis as long as the index.
func checkIndexAlong(kernel, name string, v, index View, axis int) (Shape, error) {
	if err := checkIndexDType(kernel, index); err != nil {
		return nil, err
	}
	if err := checkAxis(kernel, name, v, axis); err != nil {
		return nil, err
	}
	if len(index.Shape) != 1 {
		return nil, fmt.Errorf("%s: index has shape %v, want 1-D", kernel, index.Shape)
	}
	shape := v.Shape.Clone()
	shape[axis] = index.Shape[0]
	return shape, nil
}

// checkIndexDst checks the output of a gather: dtype dt and the given shape.
func checkIndexDst(kernel string, dst View, dt DType, shape Shape) error {
	if dst.DType != dt {
		return fmt.Errorf("%s: dst is %v, want %v", kernel, dst.DType, dt)
	}
	if !dst.Shape.Equal(shape) {
		return fmt.Errorf("%s: dst has shape %v, want %v", kernel, dst.Shape, shape)
	}
	if dt.Size() == 0 {
		return fmt.Errorf("%s: dtype %v", kernel, dt)
	}
	return nil
}

// checkAccumulation checks the dtypes of an accumulation into dst and that
// dst, which is written in place, repeats no element.
func checkAccumulation(kernel string, dst, src View) error {
	switch dst.DType {
	case Float32, Float64, Int32, Int64:
	default:
		return fmt.Errorf("%s: dst is %v, want float32, float64, int32 or int64", kernel, dst.DType)
	}
	if src.DType != dst.DType {
		return fmt.Errorf("%s: src is %v and dst %v", kernel, src.DType, dst.DType)
	}
	for d, n := range dst.Shape {
		if n > 1 && dst.Strides[d] == 0 {
			return fmt.Errorf("%s: dst of shape %v has stride 0 on axis %d (a broadcast view cannot be accumulated into)", kernel, dst.Shape, d)
		}
	}
	return nil
}

// CheckGather checks the operands of Backend.Gather: index int32 or int64
// of x's rank, no larger than x off the axis, and dst of x's dtype and
// index's shape.
func CheckGather(kernel string, dst, x, index View, axis int) error {
	if err := checkIndexDType(kernel, index); err != nil {
		return err
	}
	if err := checkAxis(kernel, "x", x, axis); err != nil {
		return err
	}
	r := len(x.Shape)
	if len(index.Shape) != r {
		return fmt.Errorf("%s: index of shape %v and x of shape %v differ in rank", kernel, index.Shape, x.Shape)
	}
	for d := range r {
		if d != axis && index.Shape[d] > x.Shape[d] {
			return fmt.Errorf("%s: index of shape %v exceeds x of shape %v on axis %d", kernel, index.Shape, x.Shape, d)
		}
	}
	return checkIndexDst(kernel, dst, x.DType, index.Shape)
}

// CheckIndexSelect checks the operands of Backend.IndexSelect and returns
// dst's shape: x's with the axis as long as the 1-D index.
func CheckIndexSelect(kernel string, dst, x, index View, axis int) (Shape, error) {
	shape, err := checkIndexAlong(kernel, "x", x, index, axis)
	if err != nil {
		return nil, err
	}
	return shape, checkIndexDst(kernel, dst, x.DType, shape)
}

// CheckScatterAdd checks the operands of Backend.ScatterAdd: index int32
// or int64, dst, index and src of one rank, index no larger than src on
// any axis nor than dst off the axis, and dst and src of one dtype that
// accumulates (float32, float64, int32, int64), dst without repeated
// elements.
func CheckScatterAdd(kernel string, dst, index, src View, axis int) error {
	if err := checkIndexDType(kernel, index); err != nil {
		return err
	}
	if err := checkAxis(kernel, "dst", dst, axis); err != nil {
		return err
	}
	r := len(dst.Shape)
	if len(index.Shape) != r || len(src.Shape) != r {
		return fmt.Errorf("%s: dst %v, index %v and src %v differ in rank", kernel, dst.Shape, index.Shape, src.Shape)
	}
	for d := range r {
		if index.Shape[d] > src.Shape[d] || (d != axis && index.Shape[d] > dst.Shape[d]) {
			return fmt.Errorf("%s: index of shape %v exceeds src %v or dst %v on axis %d", kernel, index.Shape, src.Shape, dst.Shape, d)
		}
	}
	return checkAccumulation(kernel, dst, src)
}

// CheckIndexAdd checks the operands of Backend.IndexAdd and returns src's
// shape: dst's with the axis as long as the 1-D index. dst and src are
// checked as for CheckScatterAdd.
func CheckIndexAdd(kernel string, dst, index, src View, axis int) (Shape, error) {
	shape, err := checkIndexAlong(kernel, "dst", dst, index, axis)
	if err != nil {
		return nil, err
	}
	if !src.Shape.Equal(shape) {
		return nil, fmt.Errorf("%s: src has shape %v, want %v for dst %v and %d indices", kernel, src.Shape, shape, dst.Shape, index.Shape[0])
	}
	return shape, checkAccumulation(kernel, dst, src)
}
