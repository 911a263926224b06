package cuda

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/flockml/flock/backend"
)

// spreadIndex presents a 1-D index as a view of shape with the index running
// along axis and repeated (stride 0) along every other axis.
func spreadIndex(index backend.View, shape backend.Shape, axis int) backend.View {
	st := make([]int, len(shape))
	st[axis] = index.Strides[0]
	return backend.View{Buf: index.Buf, DType: index.DType, Shape: shape, Strides: st, Offset: index.Offset}
}

// axisDropped returns v's layout over shape with stride 0 on axis: the
// base offset to which index·stride is added.
func axisDropped(v backend.View, shape backend.Shape, axis int) backend.View {
	st := slices.Clone(v.Strides)
	st[axis] = 0
	return backend.View{Buf: v.Buf, DType: v.DType, Shape: shape, Strides: st, Offset: v.Offset}
}

// checkIndex finds the first element (row-major) of index outside [0, n)
// and reports it, naming its position and value. It waits for the device.
func (b *Backend) checkIndex(kernel string, index backend.View, axis, n int) error {
	count := index.NumElements()
	if count == 0 {
		return nil
	}
	l, err := coalesce(index.Shape, index)
	if err != nil {
		return err
	}
	bad, err := b.withErrorWord(func(word uintptr) error {
		a := new(Args)
		a.Ptr(b.ptr(index)).I64(int64(count)).I64(int64(n)).Ptr(word).Int(len(l.shape)).I64s(l.shape, maxDims).I64s(l.strides[0], maxDims)
		return b.launchN("index", "index_check_"+typeTag(index.DType), count, a)
	})
	if err != nil || bad == noError {
		return err
	}
	pos := make([]int, len(index.Shape))
	rem := int(bad)
	off := index.Offset
	for d := len(pos) - 1; d >= 0; d-- {
		pos[d] = rem % index.Shape[d]
		rem /= index.Shape[d]
		off += pos[d] * index.Strides[d]
	}
	es := index.DType.Size()
	raw := make([]byte, 8)
	if err := b.eng.download(raw[:es], index.Buf.(*Buffer).blk.ptr+uintptr(off*es)); err != nil {
		return err
	}
	v := int64(binary.LittleEndian.Uint64(raw))
	if es == 4 {
		v = int64(int32(binary.LittleEndian.Uint32(raw)))
	}
	return fmt.Errorf("cuda: %s: index %d at position %v out of range [0, %d) for axis %d", kernel, v, pos, n, axis)
}

// gather runs gather_<T>_<I>: dst[i] = x[base(i) + index[i]·xs] over the
// shape of dst, where xBase is x's layout over that shape with the axis
// stride zeroed.
func (b *Backend) gather(dst, xBase, index backend.View, xs, n int) error {
	count := dst.NumElements()
	if count == 0 {
		return nil
	}
	l, err := coalesce(dst.Shape, dst, xBase, index)
	if err != nil {
		return err
	}
	word, err := b.sinkWord()
	if err != nil {
		return err
	}
	{
		a := new(Args)
		a.Ptr(b.ptr(dst)).Ptr(b.ptr(xBase)).Ptr(b.ptr(index)).I64(int64(count)).I64(int64(xs)).I64(int64(n)).Ptr(word)
		a.Int(len(l.shape)).I64s(l.shape, maxDims)
		for _, s := range l.strides {
			a.I64s(s, maxDims)
		}
		return b.launchN("index", "gather_"+typeTag(dst.DType)+"_"+typeTag(index.DType), count, a)
	}
}

// Gather implements backend.Backend for every dtype; x, index and dst may
// have any strides.
func (b *Backend) Gather(dst, x, index backend.View, axis int) error {
	const k = "gather"
	if err := backend.CheckGather("cuda: "+k, dst, x, index, axis); err != nil {
		return err
	}
	for i, v := range []backend.View{dst, x, index} {
		if err := b.checkView(k, []string{"dst", "x", "index"}[i], v); err != nil {
			return err
		}
	}
	if err := b.checkIndex(k, index, axis, x.Shape[axis]); err != nil {
		return err
	}
	return b.gather(dst, axisDropped(x, index.Shape, axis), index, x.Strides[axis], x.Shape[axis])
}

// IndexSelect implements backend.Backend for every dtype.
func (b *Backend) IndexSelect(dst, x, index backend.View, axis int) error {
	const k = "index_select"
	shape, err := backend.CheckIndexSelect("cuda: "+k, dst, x, index, axis)
	if err != nil {
		return err
	}
	for i, v := range []backend.View{dst, x, index} {
		if err := b.checkView(k, []string{"dst", "x", "index"}[i], v); err != nil {
			return err
		}
	}
	if err := b.checkIndex(k, index, 0, x.Shape[axis]); err != nil {
		return err
	}
	return b.gather(dst, axisDropped(x, shape, axis), spreadIndex(index, shape, axis), x.Strides[axis], x.Shape[axis])
}

// scatterAdd runs scatter_add over shape (index's shape, or src's for
// index_add): one thread per line along axis.
func (b *Backend) scatterAdd(dst, index, src backend.View, axis int, shape backend.Shape) error {
	if shape.NumElements() == 0 {
		return nil
	}
	lineShape := shape.Clone()
	alen := lineShape[axis]
	lineShape[axis] = 1
	lines := lineShape.NumElements()
	l, err := coalesce(lineShape, axisDropped(dst, lineShape, axis), axisDropped(src, lineShape, axis), axisDropped(index, lineShape, axis))
	if err != nil {
		return err
	}
	name := "scatter_add_" + typeTag(dst.DType) + "_" + typeTag(index.DType)
	word, err := b.sinkWord()
	if err != nil {
		return err
	}
	{
		a := new(Args)
		a.Ptr(b.ptr(dst)).Ptr(b.ptr(src)).Ptr(b.ptr(index)).I64(int64(lines)).I64(int64(alen)).
			I64(int64(dst.Strides[axis])).I64(int64(src.Strides[axis])).I64(int64(index.Strides[axis])).
			I64(int64(dst.Shape[axis])).Ptr(word)
		a.Int(len(l.shape)).I64s(l.shape, maxDims)
		for _, s := range l.strides {
			a.I64s(s, maxDims)
		}
		return b.launchN("index", name, lines, a)
	}
}

// ScatterAdd implements backend.Backend: each line along axis is one
// thread's, added in order, so results do not depend on scheduling.
func (b *Backend) ScatterAdd(dst, index, src backend.View, axis int) error {
	const k = "scatter_add"
	if err := backend.CheckScatterAdd("cuda: "+k, dst, index, src, axis); err != nil {
		return err
	}
	for i, v := range []backend.View{dst, index, src} {
		if err := b.checkView(k, []string{"dst", "index", "src"}[i], v); err != nil {
			return err
		}
	}
	if err := b.checkIndex(k, index, axis, dst.Shape[axis]); err != nil {
		return err
	}
	return b.scatterAdd(dst, index, src, axis, index.Shape)
}

// IndexAdd implements backend.Backend; repeated indices accumulate in order.
func (b *Backend) IndexAdd(dst, index, src backend.View, axis int) error {
	const k = "index_add"
	shape, err := backend.CheckIndexAdd("cuda: "+k, dst, index, src, axis)
	if err != nil {
		return err
	}
	for i, v := range []backend.View{dst, index, src} {
		if err := b.checkView(k, []string{"dst", "index", "src"}[i], v); err != nil {
			return err
		}
	}
	if err := b.checkIndex(k, index, 0, dst.Shape[axis]); err != nil {
		return err
	}
	return b.scatterAdd(dst, spreadIndex(index, shape, axis), src, axis, shape)
}
