package tensor

import (
	"fmt"
	"slices"

	"github.com/flockml/flock/backend"
)

// inferShape resolves a single −1 extent so that the result has n elements.
func inferShape(op string, from Shape, shape []int) Shape {
	out := Shape(slices.Clone(shape))
	infer := -1
	known := 1
	for i, d := range out {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			panic(fmt.Sprintf("tensor: %s: invalid shape %v", op, shape))
		default:
			known *= d
		}
	}
	n := from.NumElements()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			panic(fmt.Sprintf("tensor: %s: cannot infer -1 in %v from %v", op, shape, from))
		}
		out[infer] = n / known
	} else if known != n {
		panic(fmt.Sprintf("tensor: %s: shape %v (%d elements) does not fit %v (%d elements)", op, shape, known, from, n))
	}
	return out
}

// viewStrides returns strides that present t as shape without copying, or
// false when t's layout does not allow it (the rule of torch.Tensor.view: each
// run of merged axes must be contiguous in memory).
func viewStrides(t *Tensor, shape Shape) ([]int, bool) {
	// Drop extent-1 axes of the source; they constrain nothing.
	var os, ost []int
	for i, d := range t.shape {
		if d != 1 {
			os = append(os, d)
			ost = append(ost, t.strides[i])
		}
	}
	st := make([]int, len(shape))
	if shape.NumElements() == 0 {
		copy(st, backend.ContiguousStrides(shape))
		return st, true
	}
	j := len(shape) - 1
	for i := len(os) - 1; i >= 0; {
		// Gather the source chunk [k, i] that is contiguous within itself.
		k := i
		for k > 0 && ost[k-1] == ost[k]*os[k] {
			k--
		}
		size := 1
		for m := k; m <= i; m++ {
			size *= os[m]
		}
		stride := ost[i]
		for size > 1 || (j >= 0 && shape[j] == 1) {
			if j < 0 {
				return nil, false
			}
			if shape[j] == 1 {
				st[j] = stride
				j--
				continue
			}
			if size%shape[j] != 0 {
				return nil, false
			}
			st[j] = stride
			stride *= shape[j]
			size /= shape[j]
			j--
		}
		i = k - 1
	}
	for ; j >= 0; j-- {
		if shape[j] != 1 {
			return nil, false
		}
		st[j] = 1
	}
	return st, true
}

// View returns t with a new shape sharing its storage; one extent may be −1.
// It panics when t's strides do not allow a view (use Reshape).
func (t *Tensor) View(shape ...int) *Tensor {
	s := inferShape("View", t.shape, shape)
	st, ok := viewStrides(t, s)
	if !ok {
		panic(fmt.Sprintf("tensor: View: a tensor of shape %v and strides %v cannot be viewed as %v; use Reshape, which copies", t.shape, t.strides, s))
	}
	return t.view(s, st, t.offset)
}

// Reshape returns t with a new shape: a view when the layout allows it, a
// contiguous copy otherwise. One extent may be −1.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	s := inferShape("Reshape", t.shape, shape)
	if st, ok := viewStrides(t, s); ok {
		return t.view(s, st, t.offset)
	}
	c := t.Clone()
	defer c.Release()
	return c.view(s, backend.ContiguousStrides(s), 0)
}

// Flatten reshapes axes [start, end] (inclusive, negatives allowed) into one.
func (t *Tensor) Flatten(start, end int) *Tensor {
	if t.Dim() == 0 {
		return t.Reshape(1)
	}
	start, end = t.axis("Flatten", start), t.axis("Flatten", end)
	if start > end {
		panic(fmt.Sprintf("tensor: Flatten: start %d after end %d", start, end))
	}
	shape := append([]int{}, t.shape[:start]...)
	shape = append(shape, t.shape[start:end+1].NumElements())
	shape = append(shape, t.shape[end+1:]...)
	return t.Reshape(shape...)
}

// Slice returns the view of t with axis restricted to [start, end). Negative
// bounds count from the end; bounds are clamped like Python slices.
func (t *Tensor) Slice(axis, start, end int) *Tensor {
	return t.SliceStep(axis, start, end, 1)
}

// SliceStep returns the view of t with axis restricted to start, start+step,
// ... before end (step > 0).
func (t *Tensor) SliceStep(axis, start, end, step int) *Tensor {
	a := t.axis("Slice", axis)
	if step <= 0 {
		panic(fmt.Sprintf("tensor: Slice: step %d must be positive", step))
	}
	n := t.shape[a]
	clamp := func(i int) int {
		if i < 0 {
			i += n
		}
		return max(0, min(i, n))
	}
	start, end = clamp(start), clamp(end)
	cnt := 0
	if end > start {
		cnt = (end - start + step - 1) / step
	}
	shape := t.shape.Clone()
	shape[a] = cnt
	st := slices.Clone(t.strides)
	st[a] *= step
	off := t.offset
	if cnt > 0 {
		off += start * t.strides[a]
	}
	return t.view(shape, st, off)
}

// Select returns the view of t at index i of axis, with that axis removed.
func (t *Tensor) Select(axis, i int) *Tensor {
	a := t.axis("Select", axis)
	n := t.shape[a]
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		panic(fmt.Sprintf("tensor: Select: index %d out of range for axis %d of shape %v", i, a, t.shape))
	}
	shape := slices.Delete(t.shape.Clone(), a, a+1)
	st := slices.Delete(slices.Clone(t.strides), a, a+1)
	return t.view(shape, st, t.offset+i*t.strides[a])
}

// Permute returns the view of t with its axes reordered: axis i of the result
// is axis axes[i] of t.
func (t *Tensor) Permute(axes ...int) *Tensor {
	if len(axes) != t.Dim() {
		panic(fmt.Sprintf("tensor: Permute: %d axes given for shape %v", len(axes), t.shape))
	}
	seen := make([]bool, t.Dim())
	shape := make(Shape, len(axes))
	st := make([]int, len(axes))
	for i, a := range axes {
		a = t.axis("Permute", a)
		if seen[a] {
			panic(fmt.Sprintf("tensor: Permute: axis %d repeated in %v", a, axes))
		}
		seen[a] = true
		shape[i], st[i] = t.shape[a], t.strides[a]
	}
	return t.view(shape, st, t.offset)
}

// Transpose returns the view of t with axes a and b swapped.
func (t *Tensor) Transpose(a, b int) *Tensor {
	a, b = t.axis("Transpose", a), t.axis("Transpose", b)
	perm := make([]int, t.Dim())
	for i := range perm {
		perm[i] = i
	}
	perm[a], perm[b] = b, a
	return t.Permute(perm...)
}

// T returns the transpose of a 2-D tensor (a view).
func (t *Tensor) T() *Tensor {
	if t.Dim() != 2 {
		panic(fmt.Sprintf("tensor: T: needs a 2-D tensor, got shape %v", t.shape))
	}
	return t.Transpose(0, 1)
}

// Unsqueeze returns the view of t with an axis of extent 1 inserted at axis
// (−1 appends).
func (t *Tensor) Unsqueeze(axis int) *Tensor {
	r := t.Dim() + 1
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		panic(fmt.Sprintf("tensor: Unsqueeze: axis %d out of range for shape %v", axis, t.shape))
	}
	stride := 1
	if axis < t.Dim() {
		stride = t.strides[axis] * t.shape[axis]
	}
	shape := slices.Insert(t.shape.Clone(), axis, 1)
	st := slices.Insert(slices.Clone(t.strides), axis, stride)
	return t.view(shape, st, t.offset)
}

// Squeeze returns the view of t without the given axes of extent 1; with no
// axes it removes every axis of extent 1.
func (t *Tensor) Squeeze(axes ...int) *Tensor {
	drop := make([]bool, t.Dim())
	if len(axes) == 0 {
		for i, d := range t.shape {
			drop[i] = d == 1
		}
	}
	for _, a := range axes {
		a = t.axis("Squeeze", a)
		if t.shape[a] != 1 {
			panic(fmt.Sprintf("tensor: Squeeze: axis %d of shape %v has extent %d, not 1", a, t.shape, t.shape[a]))
		}
		drop[a] = true
	}
	var shape Shape = Shape{}
	var st []int = []int{}
	for i := range t.shape {
		if !drop[i] {
			shape = append(shape, t.shape[i])
			st = append(st, t.strides[i])
		}
	}
	return t.view(shape, st, t.offset)
}

// BroadcastTo returns the view of t expanded to shape under NumPy's rules:
// new leading axes and axes of extent 1 get stride 0.
func (t *Tensor) BroadcastTo(shape Shape) *Tensor {
	if len(shape) < t.Dim() {
		panic(fmt.Sprintf("tensor: BroadcastTo: cannot broadcast %v to the lower-rank %v", t.shape, shape))
	}
	lead := len(shape) - t.Dim()
	st := make([]int, len(shape))
	for i := range shape {
		if i < lead {
			continue
		}
		d := t.shape[i-lead]
		switch {
		case d == shape[i]:
			st[i] = t.strides[i-lead]
		case d == 1:
			st[i] = 0
		default:
			panic(fmt.Sprintf("tensor: BroadcastTo: cannot broadcast %v to %v (axis %d)", t.shape, shape, i))
		}
	}
	return t.view(shape.Clone(), st, t.offset)
}

// Expand is BroadcastTo with PyTorch's spelling: −1 keeps an extent.
func (t *Tensor) Expand(shape ...int) *Tensor {
	s := Shape(slices.Clone(shape))
	lead := len(s) - t.Dim()
	for i := range s {
		if s[i] == -1 {
			if i < lead {
				panic(fmt.Sprintf("tensor: Expand: -1 for a new leading axis in %v", shape))
			}
			s[i] = t.shape[i-lead]
		}
	}
	return t.BroadcastTo(s)
}
