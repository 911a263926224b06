package cuda

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// splitAxis views shape as [outer, dim, inner] around axis.
func splitAxis(shape backend.Shape, axis int) (outer, dim, inner int) {
	outer, inner = 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	return outer, shape[axis], inner
}

func (b *Backend) softmaxArgs(kernel string, shape backend.Shape, axis int, names []string, vs ...backend.View) error {
	if axis < 0 || axis >= len(shape) {
		return fmt.Errorf("cuda: %s: axis %d out of range for shape %v", kernel, axis, shape)
	}
	if err := floatType(kernel, vs[0].DType); err != nil {
		return err
	}
	for i, v := range vs {
		if err := b.checkDense(kernel, names[i], v, vs[0].DType, shape); err != nil {
			return err
		}
	}
	return nil
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// Softmax implements backend.Backend: along axis of contiguous x,
// e^{x−m}/Σe^{x−m} (or x − m − log Σe^{x−m}) with m the line's maximum, the
// sums in float64. A line along the last axis is one block; otherwise each
// thread takes one line, neighbouring threads reading neighbouring memory.
func (b *Backend) Softmax(dst, x backend.View, axis int, log bool) error {
	if err := b.softmaxArgs("softmax", x.Shape, axis, []string{"x", "dst"}, x, dst); err != nil {
		return err
	}
	if x.NumElements() == 0 {
		return nil
	}
	outer, dim, inner := splitAxis(x.Shape, axis)
	t := typeTag(x.DType)
	a := new(Args)
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(x))
	if inner == 1 {
		a.I64(int64(dim)).Int(boolInt(log))
		return b.eng.launch("softmax", "softmax_rows_"+t, outer, rowThreads(dim), 0, a)
	}
	a.I64(int64(outer)).I64(int64(dim)).I64(int64(inner)).Int(boolInt(log))
	return b.launchN("softmax", "softmax_cols_"+t, outer*inner, a)
}

// SoftmaxBackward implements backend.Backend.
func (b *Backend) SoftmaxBackward(dx, y, dy backend.View, axis int, log bool) error {
	if err := b.softmaxArgs("softmax_backward", y.Shape, axis, []string{"y", "dy", "dx"}, y, dy, dx); err != nil {
		return err
	}
	if y.NumElements() == 0 {
		return nil
	}
	outer, dim, inner := splitAxis(y.Shape, axis)
	t := typeTag(y.DType)
	a := new(Args)
	a.Ptr(b.ptr(dx)).Ptr(b.ptr(y)).Ptr(b.ptr(dy))
	if inner == 1 {
		a.I64(int64(dim)).Int(boolInt(log))
		return b.eng.launch("softmax", "softmax_back_rows_"+t, outer, rowThreads(dim), 0, a)
	}
	a.I64(int64(outer)).I64(int64(dim)).I64(int64(inner)).Int(boolInt(log))
	return b.launchN("softmax", "softmax_back_cols_"+t, outer*inner, a)
}

func (b *Backend) crossEntropyArgs(kernel string, logits, target backend.View) (n, classes int, err error) {
	if len(logits.Shape) != 2 {
		return 0, 0, fmt.Errorf("cuda: %s: logits have shape %v, want [N, C]", kernel, logits.Shape)
	}
	if err := floatType(kernel, logits.DType); err != nil {
		return 0, 0, err
	}
	if err := b.checkDense(kernel, "logits", logits, logits.DType, nil); err != nil {
		return 0, 0, err
	}
	n, classes = logits.Shape[0], logits.Shape[1]
	if target.DType != backend.Int32 && target.DType != backend.Int64 {
		return 0, 0, fmt.Errorf("cuda: %s: target is %v, want int32 or int64", kernel, target.DType)
	}
	if !target.Shape.Equal(backend.Shape{n}) {
		return 0, 0, fmt.Errorf("cuda: %s: target has shape %v for logits %v, want [%d]", kernel, target.Shape, logits.Shape, n)
	}
	if err := b.checkView(kernel, "target", target); err != nil {
		return 0, 0, err
	}
	return n, classes, nil
}

// CrossEntropy implements backend.Backend: per row,
// (1−ε)·(lse − x_t) + ε·(lse − mean_c x_c). A target outside [0, C) other
// than IgnoreIndex is an error naming its row; finding it waits for the
// device.
func (b *Backend) CrossEntropy(loss, logits, target backend.View, p backend.CrossEntropyParams) error {
	const k = "cross_entropy"
	n, classes, err := b.crossEntropyArgs(k, logits, target)
	if err != nil {
		return err
	}
	if err := b.checkDense(k, "loss", loss, logits.DType, backend.Shape{n}); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	name := "xent_" + typeTag(logits.DType) + "_" + typeTag(target.DType)
	bad, err := b.withErrorWord(func(word uintptr) error {
		a := new(Args)
		a.Ptr(b.ptr(loss)).Ptr(b.ptr(logits)).Ptr(b.ptr(target)).I64(int64(target.Strides[0])).I64(int64(classes)).
			F64(p.LabelSmoothing).I64(p.IgnoreIndex).Ptr(word)
		return b.eng.launch("softmax", name, n, rowThreads(classes), 0, a)
	})
	if err != nil {
		return err
	}
	return b.targetError(k, bad, target, classes)
}

// targetError names the first bad target, reading it back.
func (b *Backend) targetError(kernel string, row int64, target backend.View, classes int) error {
	if row == noError {
		return nil
	}
	es := target.DType.Size()
	raw := make([]byte, es)
	at := target.Offset + int(row)*target.Strides[0]
	if err := b.eng.download(raw, target.Buf.(*Buffer).blk.ptr+uintptr(at*es)); err != nil {
		return err
	}
	var t int64
	if es == 4 {
		t = int64(int32(uint32(raw[0]) | uint32(raw[1])<<8 | uint32(raw[2])<<16 | uint32(raw[3])<<24))
	} else {
		for i := 7; i >= 0; i-- {
			t = t<<8 | int64(raw[i])
		}
	}
	return fmt.Errorf("cuda: %s: target %d of row %d out of range [0, %d)", kernel, t, row, classes)
}

// CrossEntropyBackward implements backend.Backend; dloss may be any strided
// [N] view (stride 0 broadcasts one value).
func (b *Backend) CrossEntropyBackward(dlogits, logits, target, dloss backend.View, p backend.CrossEntropyParams) error {
	const k = "cross_entropy_backward"
	n, classes, err := b.crossEntropyArgs(k, logits, target)
	if err != nil {
		return err
	}
	if err := b.checkDense(k, "dlogits", dlogits, logits.DType, logits.Shape); err != nil {
		return err
	}
	if dloss.DType != logits.DType || !dloss.Shape.Equal(backend.Shape{n}) {
		return fmt.Errorf("cuda: %s: dloss is %v%v, want %v[%d]", k, dloss.DType, dloss.Shape, logits.DType, n)
	}
	if err := b.checkView(k, "dloss", dloss); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	name := "xent_back_" + typeTag(logits.DType) + "_" + typeTag(target.DType)
	bad, err := b.withErrorWord(func(word uintptr) error {
		a := new(Args)
		a.Ptr(b.ptr(dlogits)).Ptr(b.ptr(logits)).Ptr(b.ptr(target)).I64(int64(target.Strides[0])).
			Ptr(b.ptr(dloss)).I64(int64(dloss.Strides[0])).I64(int64(classes)).F64(p.LabelSmoothing).I64(p.IgnoreIndex).Ptr(word)
		return b.eng.launch("softmax", name, n, rowThreads(classes), 0, a)
	})
	if err != nil {
		return err
	}
	return b.targetError(k, bad, target, classes)
}
