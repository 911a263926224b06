package tensor

import "fmt"

// Concat joins ts along an existing axis, like torch.cat: they share dtype,
// device, rank and every extent but axis's.
func Concat(axis int, ts ...*Tensor) *Tensor {
	const op = "Concat"
	if len(ts) == 0 {
		panic(fmt.Sprintf("tensor: %s: no tensors to join", op))
	}
	dev := sameDevice(op, ts...)
	dt := sameDType(op, ts...)
	a := ts[0].axis(op, axis)
	shape := ts[0].shape.Clone()
	shape[a] = 0
	for i, t := range ts {
		if t.Dim() != len(shape) {
			panic(fmt.Sprintf("tensor: %s: tensor %d has shape %v, of another rank than %v (%s)", op, i, t.shape, ts[0].shape, describe(ts...)))
		}
		for d := range shape {
			if d != a && t.shape[d] != ts[0].shape[d] {
				panic(fmt.Sprintf("tensor: %s: tensor %d has shape %v, which differs from %v off axis %d (%s)", op, i, t.shape, ts[0].shape, a, describe(ts...)))
			}
		}
		shape[a] += t.shape[a]
	}
	out := empty(dev, dt, shape)
	at := 0
	for _, t := range ts {
		n := t.shape[a]
		if n > 0 && t.NumElements() > 0 {
			part := out.Slice(a, at, at+n)
			must(op, dev.Copy(part.Raw(), t.Raw()), t)
			part.Release()
		}
		at += n
	}
	return out
}

// Stack joins ts, which share one shape, along a new axis inserted at axis
// (0 ≤ axis ≤ rank, or negative counting from rank+1), like torch.stack.
func Stack(axis int, ts ...*Tensor) *Tensor {
	const op = "Stack"
	if len(ts) == 0 {
		panic(fmt.Sprintf("tensor: %s: no tensors to stack", op))
	}
	r := ts[0].Dim() + 1
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		panic(fmt.Sprintf("tensor: %s: axis %d out of range for stacking shape %v", op, axis, ts[0].shape))
	}
	us := make([]*Tensor, len(ts))
	for i, t := range ts {
		if !t.shape.Equal(ts[0].shape) {
			panic(fmt.Sprintf("tensor: %s: tensor %d has shape %v, want %v like the first (%s)", op, i, t.shape, ts[0].shape, describe(ts...)))
		}
		us[i] = t.Unsqueeze(axis)
	}
	defer func() {
		for _, u := range us {
			u.Release()
		}
	}()
	return Concat(axis, us...)
}

// Split cuts t along axis into consecutive views of the given sizes, which
// must add up to the axis's extent. A single size s instead cuts pieces of s
// (the last one smaller when s does not divide the extent), like
// torch.split with an int.
func (t *Tensor) Split(axis int, sizes ...int) []*Tensor {
	const op = "Split"
	a := t.axis(op, axis)
	n := t.shape[a]
	if len(sizes) == 0 {
		panic(fmt.Sprintf("tensor: %s: no sizes given for axis %d of shape %v", op, a, t.shape))
	}
	if len(sizes) == 1 && sizes[0] != n {
		s := sizes[0]
		if s <= 0 {
			panic(fmt.Sprintf("tensor: %s: piece size %d must be positive", op, s))
		}
		sizes = nil
		for at := 0; at < n; at += s {
			sizes = append(sizes, min(s, n-at))
		}
		if n == 0 {
			sizes = []int{0}
		}
	}
	sum := 0
	for _, s := range sizes {
		if s < 0 {
			panic(fmt.Sprintf("tensor: %s: negative size in %v", op, sizes))
		}
		sum += s
	}
	if sum != n {
		panic(fmt.Sprintf("tensor: %s: sizes %v add up to %d, but axis %d of shape %v has extent %d", op, sizes, sum, a, t.shape, n))
	}
	parts := make([]*Tensor, len(sizes))
	at := 0
	for i, s := range sizes {
		parts[i] = t.Slice(a, at, at+s)
		at += s
	}
	return parts
}

// Chunk cuts t along axis into views of ⌈extent/n⌉ elements (the last one
// smaller), like torch.chunk: there may be fewer than n pieces, and an empty
// axis gives n empty pieces.
func (t *Tensor) Chunk(n, axis int) []*Tensor {
	const op = "Chunk"
	if n <= 0 {
		panic(fmt.Sprintf("tensor: %s: number of chunks %d must be positive", op, n))
	}
	a := t.axis(op, axis)
	ext := t.shape[a]
	if ext == 0 {
		return t.Split(a, make([]int, n)...)
	}
	return t.Split(a, (ext+n-1)/n)
}

// Pad returns x padded with value, as torch.nn.functional.pad in constant
// mode: pads holds (before, after) pairs for the last axis, then the one
// before it, and so on; a negative pad crops that many elements instead.
func Pad(x *Tensor, pads []int, value float64) *Tensor {
	const op = "Pad"
	if len(pads)%2 != 0 || len(pads)/2 > x.Dim() {
		panic(fmt.Sprintf("tensor: %s: pads %v must hold (before, after) pairs for at most the %d axes of shape %v", op, pads, x.Dim(), x.shape))
	}
	shape := x.shape.Clone()
	src := x.Retain()
	defer func() { src.Release() }()
	type span struct{ axis, start, end int }
	var dstSpans []span
	for i := 0; i < len(pads); i += 2 {
		a := x.Dim() - 1 - i/2
		before, after := pads[i], pads[i+1]
		shape[a] = x.shape[a] + before + after
		if shape[a] < 0 {
			panic(fmt.Sprintf("tensor: %s: pads (%d, %d) crop more than the %d elements of axis %d of shape %v", op, before, after, x.shape[a], a, x.shape))
		}
		lo, hi := max(0, -before), x.shape[a]-max(0, -after)
		cropped := src.Slice(a, lo, max(lo, hi))
		src.Release()
		src = cropped
		dstSpans = append(dstSpans, span{a, max(0, before), max(0, before) + src.shape[a]})
	}
	out := empty(x.Device(), x.dtype, shape)
	out.Fill(value)
	if src.NumElements() == 0 {
		return out
	}
	dst := out.Retain()
	for _, s := range dstSpans {
		v := dst.Slice(s.axis, s.start, s.end)
		dst.Release()
		dst = v
	}
	defer dst.Release()
	must(op, x.Device().Copy(dst.Raw(), src.Raw()), x)
	return out
}
