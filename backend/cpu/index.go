package cpu

import (
	"fmt"
	"slices"

	"github.com/flockml/flock/backend"
)

// indexGrain is the number of elements an indexing chunk should move to be
// worth a goroutine.
const indexGrain = 32768

// Gather implements backend.Backend: for every position i of index (whose
// shape dst has), dst[i] = x[i with its axis coordinate replaced by
// index[i]], as torch.gather. Off the axis, index may be smaller than x.
// Every dtype is accepted; x and index may have any strides.
func (c *Backend) Gather(dst, x, index backend.View, axis int) error {
	const k = "cpu: gather"
	if err := backend.CheckGather(k, dst, x, index, axis); err != nil {
		return err
	}
	if err := indexRange(k, index, axis, x.Shape[axis]); err != nil {
		return err
	}
	gatherWalk(dst, x, index, axis, x.Strides[axis])
	return nil
}

// IndexSelect implements backend.Backend: dst is x with axis restricted to
// the entries of the 1-D index, dst[..., j, ...] = x[..., index[j], ...].
// Every dtype is accepted; x and index may have any strides.
func (c *Backend) IndexSelect(dst, x, index backend.View, axis int) error {
	const k = "cpu: index_select"
	shape, err := backend.CheckIndexSelect(k, dst, x, index, axis)
	if err != nil {
		return err
	}
	if err := indexRange(k, index, 0, x.Shape[axis]); err != nil {
		return err
	}
	gatherWalk(dst, x, spreadIndex(index, shape, axis), axis, x.Strides[axis])
	return nil
}

// ScatterAdd implements backend.Backend: for every position i of index,
// dst[i with its axis coordinate replaced by index[i]] += src[i], as
// torch.Tensor.scatter_add_. Off the axis, index may be smaller than dst, and
// on every axis smaller than src. dst may have any strides that do not
// overlap; the sums follow a fixed order, so results do not depend on the
// number of threads.
func (c *Backend) ScatterAdd(dst, index, src backend.View, axis int) error {
	const k = "cpu: scatter_add"
	if err := backend.CheckScatterAdd(k, dst, index, src, axis); err != nil {
		return err
	}
	if err := indexRange(k, index, axis, dst.Shape[axis]); err != nil {
		return err
	}
	scatterWalk(dst, index, src, axis, index.Shape)
	return nil
}

// IndexAdd implements backend.Backend: dst[..., index[j], ...] +=
// src[..., j, ...] along axis, as torch.Tensor.index_add_. dst may have any
// strides that do not overlap; repeated indices accumulate in order of j.
func (c *Backend) IndexAdd(dst, index, src backend.View, axis int) error {
	const k = "cpu: index_add"
	shape, err := backend.CheckIndexAdd(k, dst, index, src, axis)
	if err != nil {
		return err
	}
	if err := indexRange(k, index, 0, dst.Shape[axis]); err != nil {
		return err
	}
	scatterWalk(dst, spreadIndex(index, shape, axis), src, axis, shape)
	return nil
}

// spreadIndex presents a 1-D index as a view of shape with the index running
// along axis and repeated (stride 0) along every other axis.
func spreadIndex(index backend.View, shape backend.Shape, axis int) backend.View {
	st := make([]int, len(shape))
	st[axis] = index.Strides[0]
	return backend.View{Buf: index.Buf, DType: index.DType, Shape: shape, Strides: st, Offset: index.Offset}
}

// alongAxisDropped returns v's layout with stride 0 on axis: the base offset
// to which index·stride is added.
func alongAxisDropped(v backend.View, axis int) backend.View {
	st := slices.Clone(v.Strides)
	st[axis] = 0
	return backend.View{Buf: v.Buf, DType: v.DType, Shape: v.Shape, Strides: st, Offset: v.Offset}
}

// indexRange reports the first element of index (in row-major order) that
// lies outside [0, n), naming its position.
func indexRange(kernel string, index backend.View, axis, n int) error {
	if index.NumElements() == 0 {
		return nil
	}
	if index.DType == backend.Int32 {
		return indexRangeOf(kernel, I32(index), index, axis, n)
	}
	return indexRangeOf(kernel, I64(index), index, axis, n)
}

func indexRangeOf[I int32 | int64](kernel string, iv []I, index backend.View, axis, n int) error {
	l := newLayout(index.Shape, index)
	cnt, step := l.inner()
	ok := true
	l.each(0, l.rows(), func(off [maxOperands]int) {
		o := off[0]
		for range cnt {
			if v := iv[o]; v < 0 || int64(v) >= int64(n) {
				ok = false
			}
			o += step[0]
		}
	})
	if ok {
		return nil
	}
	pos := make([]int, len(index.Shape))
	for {
		o := index.Offset
		for d, p := range pos {
			o += p * index.Strides[d]
		}
		if v := iv[o]; v < 0 || int64(v) >= int64(n) {
			return fmt.Errorf("%s: index %d at position %v out of range [0, %d) for axis %d", kernel, v, pos, n, axis)
		}
		for d := len(pos) - 1; d >= 0; d-- {
			pos[d]++
			if pos[d] < index.Shape[d] {
				break
			}
			pos[d] = 0
		}
	}
}

// gatherWalk sets dst[i] = x[base(i) + index[i]·axisStride] for every
// position i of dst, where index has dst's shape (possibly through zero
// strides) and base(i) is x's offset of i with the axis coordinate dropped.
func gatherWalk(dst, x, index backend.View, axis, axisStride int) {
	if dst.NumElements() == 0 {
		return
	}
	l := newLayout(dst.Shape, dst, index, alongAxisDropped(withShape(x, dst.Shape), axis))
	switch index.DType {
	case backend.Int32:
		gatherBySize(dst, x, I32(index), &l, axisStride)
	default:
		gatherBySize(dst, x, I64(index), &l, axisStride)
	}
}

// withShape returns v's layout restricted to shape (no larger than v's on
// every axis).
func withShape(v backend.View, shape backend.Shape) backend.View {
	v.Shape = shape
	return v
}

func gatherBySize[I int32 | int64](dst, x backend.View, iv []I, l *layout, axisStride int) {
	switch dst.DType.Size() {
	case 1:
		gatherRows(U8(dst), U8(x), iv, l, axisStride)
	case 2:
		gatherRows(sliceOf[uint16](dst), sliceOf[uint16](x), iv, l, axisStride)
	case 4:
		gatherRows(sliceOf[uint32](dst), sliceOf[uint32](x), iv, l, axisStride)
	default:
		gatherRows(sliceOf[uint64](dst), sliceOf[uint64](x), iv, l, axisStride)
	}
}

func gatherRows[E any, I int32 | int64](d, xv []E, iv []I, l *layout, axisStride int) {
	n, step := l.inner()
	parallelFor(l.rows(), max(1, indexGrain/max(n, 1)), func(lo, hi int) {
		l.each(lo, hi, func(off [maxOperands]int) {
			od, oi, ox := off[0], off[1], off[2]
			if step[1] != 0 {
				for range n {
					d[od] = xv[ox+int(iv[oi])*axisStride]
					od, oi, ox = od+step[0], oi+step[1], ox+step[2]
				}
				return
			}
			ox += int(iv[oi]) * axisStride
			if step[0] == 1 && step[2] == 1 {
				copy(d[od:od+n], xv[ox:ox+n])
				return
			}
			for range n {
				d[od] = xv[ox]
				od, ox = od+step[0], ox+step[2]
			}
		})
	})
}

// scatterWalk adds src[i] to dst[base(i) + index[i]·dst.Strides[axis]] for
// every position i of shape. Two positions reach the same element of dst only
// when they differ in the axis coordinate alone, so the work is split across
// threads along the other axes: by rows when the innermost run of the walk is
// the axis itself (or the axis has extent 1), and within the innermost run
// otherwise. Each element of dst is then accumulated by one thread in a fixed
// order.
func scatterWalk(dst, index, src backend.View, axis int, shape backend.Shape) {
	if shape.NumElements() == 0 {
		return
	}
	l := newLayout(shape, alongAxisDropped(withShape(dst, shape), axis), index, withShape(src, shape))
	last := -1
	for d, n := range shape {
		if n > 1 {
			last = d
		}
	}
	byRows := shape[axis] <= 1 || last == axis
	stride := dst.Strides[axis]
	switch index.DType {
	case backend.Int32:
		scatterByType(dst, src, I32(index), &l, stride, byRows)
	default:
		scatterByType(dst, src, I64(index), &l, stride, byRows)
	}
}

func scatterByType[I int32 | int64](dst, src backend.View, iv []I, l *layout, axisStride int, byRows bool) {
	switch dst.DType {
	case backend.Float32:
		scatterRows(F32(dst), F32(src), iv, l, axisStride, byRows)
	case backend.Float64:
		scatterRows(F64(dst), F64(src), iv, l, axisStride, byRows)
	case backend.Int32:
		scatterRows(I32(dst), I32(src), iv, l, axisStride, byRows)
	default:
		scatterRows(I64(dst), I64(src), iv, l, axisStride, byRows)
	}
}

func scatterRows[E float32 | float64 | int32 | int64, I int32 | int64](d, sv []E, iv []I, l *layout, axisStride int, byRows bool) {
	n, step := l.inner()
	run := func(off [maxOperands]int, lo, hi int) {
		od, oi, os := off[0]+lo*step[0], off[1]+lo*step[1], off[2]+lo*step[2]
		for range hi - lo {
			d[od+int(iv[oi])*axisStride] += sv[os]
			od, oi, os = od+step[0], oi+step[1], os+step[2]
		}
	}
	rows := l.rows()
	if byRows {
		parallelFor(rows, max(1, indexGrain/max(n, 1)), func(lo, hi int) {
			l.each(lo, hi, func(off [maxOperands]int) { run(off, 0, n) })
		})
		return
	}
	parallelFor(n, max(1, indexGrain/max(rows, 1)), func(lo, hi int) {
		l.each(0, rows, func(off [maxOperands]int) { run(off, lo, hi) })
	})
}
