package tensor

import "fmt"

// Gather returns out[..i..] = x[..index[..i..]..] along axis, as
// torch.gather: index (Int32 or Int64) has x's rank, out has index's shape,
// and off the axis index may be no larger than x. An index outside
// [0, x.Size(axis)) panics.
func Gather(x *Tensor, axis int, index *Tensor) *Tensor {
	const op = "Gather"
	sameDevice(op, x, index)
	indexOnly(op, index)
	a := x.axis(op, axis)
	if index.Dim() != x.Dim() {
		panic(fmt.Sprintf("tensor: %s: index of shape %v for x of shape %v; they need the same rank", op, index.shape, x.shape))
	}
	for d := range x.shape {
		if d != a && index.shape[d] > x.shape[d] {
			panic(fmt.Sprintf("tensor: %s: index of shape %v exceeds x of shape %v on axis %d", op, index.shape, x.shape, d))
		}
	}
	out := empty(x.Device(), x.dtype, index.shape)
	must(op, x.Device().Gather(out.Raw(), x.Raw(), index.Raw(), a), x, index)
	return out
}

// ScatterAddInPlace adds src into t along axis at the positions index names:
// t[..index[..i..]..] += src[..i..], as torch.Tensor.scatter_add_. index
// has t's rank, is no larger than src on any axis and no larger than t off
// the axis; src has t's dtype. The adding is the backward of Gather.
func (t *Tensor) ScatterAddInPlace(axis int, index, src *Tensor) {
	const op = "ScatterAddInPlace"
	sameDevice(op, t, index, src)
	sameDType(op, t, src)
	indexOnly(op, index)
	a := t.axis(op, axis)
	if index.Dim() != t.Dim() || src.Dim() != t.Dim() {
		panic(fmt.Sprintf("tensor: %s: t %v, index %v and src %v need the same rank", op, t.shape, index.shape, src.shape))
	}
	for d := range t.shape {
		if index.shape[d] > src.shape[d] || (d != a && index.shape[d] > t.shape[d]) {
			panic(fmt.Sprintf("tensor: %s: index of shape %v exceeds src %v or t %v on axis %d", op, index.shape, src.shape, t.shape, d))
		}
	}
	must(op, t.Device().ScatterAdd(t.Raw(), index.Raw(), src.Raw(), a), t, index, src)
}

// IndexSelect returns x with axis restricted to the entries of the 1-D
// index (Int32 or Int64), in index's order and with repeats, as
// torch.index_select. A 0-dimensional index selects one entry and keeps the
// axis (of extent 1).
func IndexSelect(x *Tensor, axis int, index *Tensor) *Tensor {
	const op = "IndexSelect"
	sameDevice(op, x, index)
	indexOnly(op, index)
	a := x.axis(op, axis)
	idx := vectorIndex(op, index)
	defer idx.Release()
	shape := x.shape.Clone()
	shape[a] = idx.shape[0]
	out := empty(x.Device(), x.dtype, shape)
	must(op, x.Device().IndexSelect(out.Raw(), x.Raw(), idx.Raw(), a), x, index)
	return out
}

// IndexAddInPlace adds src into t along axis at the entries of the 1-D
// index: t[..., index[j], ...] += src[..., j, ...], as torch.index_add_.
// src has t's shape except for len(index) on axis. It is the backward of
// IndexSelect.
func (t *Tensor) IndexAddInPlace(axis int, index, src *Tensor) {
	const op = "IndexAddInPlace"
	sameDevice(op, t, index, src)
	sameDType(op, t, src)
	indexOnly(op, index)
	a := t.axis(op, axis)
	idx := vectorIndex(op, index)
	defer idx.Release()
	want := t.shape.Clone()
	want[a] = idx.shape[0]
	if !src.shape.Equal(want) {
		panic(fmt.Sprintf("tensor: %s: src of shape %v for t %v and %d indices along axis %d; want %v", op, src.shape, t.shape, idx.shape[0], a, want))
	}
	must(op, t.Device().IndexAdd(t.Raw(), idx.Raw(), src.Raw(), a), t, index, src)
}

// Embedding looks up rows of weight [V, D]: out[i..., :] = weight[index[i...], :]
// for an index of any shape, giving index.shape + [D].
func Embedding(weight, index *Tensor) *Tensor {
	const op = "Embedding"
	if weight.Dim() != 2 {
		panic(fmt.Sprintf("tensor: %s: weight of shape %v; want [V, D]", op, weight.shape))
	}
	indexOnly(op, index)
	flat := index.Reshape(-1)
	defer flat.Release()
	rows := IndexSelect(weight, 0, flat)
	defer rows.Release()
	shape := append(index.shape.Clone(), weight.shape[1])
	return rows.View(shape...)
}

// indexOnly panics unless index holds Int32 or Int64 indices.
func indexOnly(op string, index *Tensor) {
	if index.dtype != Int32 && index.dtype != Int64 {
		panic(fmt.Sprintf("tensor: %s: index of dtype %v; want int32 or int64 (convert it with Cast)", op, index.dtype))
	}
}

// vectorIndex returns a 1-D index as a new reference, a 0-D one as [1].
func vectorIndex(op string, index *Tensor) *Tensor {
	switch index.Dim() {
	case 0:
		return index.Reshape(1)
	case 1:
		return index.Retain()
	}
	panic(fmt.Sprintf("tensor: %s: index of shape %v; want a 1-D index (flatten it with Reshape(-1))", op, index.shape))
}
