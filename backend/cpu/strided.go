package cpu

import "github.com/flockml/flock/backend"

// maxOperands is the most views a layout walks in lockstep.
const maxOperands = 4

// layout walks up to four strided views of one shape in lockstep, one
// innermost run ("row") at a time. Axes of extent 1 are dropped and adjacent
// axes that are contiguous in every operand are merged, so a contiguous
// operation is a single long row.
type layout struct {
	shape   []int // coalesced shape, rank ≥ 1
	strides [maxOperands][]int
	offset  [maxOperands]int
	k       int
}

// newLayout prepares a walk of shape over views (each of that shape).
func newLayout(shape backend.Shape, views ...backend.View) layout {
	if len(views) > maxOperands {
		panic("cpu: layout of more than 4 operands")
	}
	l := layout{k: len(views)}
	for i, v := range views {
		l.offset[i] = v.Offset
	}
	for d := range shape {
		if shape[d] == 1 {
			continue
		}
		r := len(l.shape)
		if r > 0 {
			mergeable := true
			for i, v := range views {
				if l.strides[i][r-1] != v.Strides[d]*shape[d] {
					mergeable = false
					break
				}
			}
			if mergeable {
				l.shape[r-1] *= shape[d]
				for i, v := range views {
					l.strides[i][r-1] = v.Strides[d]
				}
				continue
			}
		}
		l.shape = append(l.shape, shape[d])
		for i, v := range views {
			l.strides[i] = append(l.strides[i], v.Strides[d])
		}
	}
	if shape.NumElements() == 0 {
		l.shape = []int{0}
		for i := range views {
			l.strides[i] = []int{0}
		}
	}
	if len(l.shape) == 0 {
		l.shape = []int{1}
		for i := range views {
			l.strides[i] = []int{0}
		}
	}
	return l
}

// rows is the number of innermost runs.
func (l *layout) rows() int {
	n := 1
	for _, d := range l.shape[:len(l.shape)-1] {
		n *= d
	}
	if l.shape[len(l.shape)-1] == 0 {
		return 0
	}
	return n
}

// inner returns the length of a run and each operand's stride along it.
func (l *layout) inner() (n int, step [maxOperands]int) {
	r := len(l.shape) - 1
	for i := 0; i < l.k; i++ {
		step[i] = l.strides[i][r]
	}
	return l.shape[r], step
}

// each calls fn with every operand's starting offset for rows [lo, hi).
func (l *layout) each(lo, hi int, fn func(off [maxOperands]int)) {
	if lo >= hi {
		return
	}
	outer := len(l.shape) - 1
	var idx [16]int
	var index []int
	if outer <= len(idx) {
		index = idx[:outer]
	} else {
		index = make([]int, outer)
	}
	off := l.offset
	rem := lo
	for d := outer - 1; d >= 0; d-- {
		index[d] = rem % l.shape[d]
		rem /= l.shape[d]
		for i := 0; i < l.k; i++ {
			off[i] += index[d] * l.strides[i][d]
		}
	}
	for row := lo; row < hi; row++ {
		fn(off)
		for d := outer - 1; d >= 0; d-- {
			index[d]++
			for i := 0; i < l.k; i++ {
				off[i] += l.strides[i][d]
			}
			if index[d] < l.shape[d] {
				break
			}
			for i := 0; i < l.k; i++ {
				off[i] -= l.shape[d] * l.strides[i][d]
			}
			index[d] = 0
		}
	}
}
