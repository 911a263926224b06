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

// maxWalkDims is the most outer axes a walk keeps in fixed-size arrays;
// layouts with more (rank above 17 after coalescing) take a slower path.
const maxWalkDims = 16

// walker steps through the rows of a layout: the index of the current row
// on each outer axis and every operand's offset at the row's start.
type walker struct {
	outer int
	shape [maxWalkDims]int
	step  [maxWalkDims][maxOperands]int // step[d][i]: operand i's stride on axis d
	index [maxWalkDims]int
	off   [maxOperands]int
}

// start positions w at row r of l, which has at most maxWalkDims outer
// axes.
func (w *walker) start(l *layout, r int) {
	w.outer = len(l.shape) - 1
	w.off = l.offset
	for d := w.outer - 1; d >= 0; d-- {
		w.shape[d] = l.shape[d]
		for i := 0; i < l.k; i++ {
			w.step[d][i] = l.strides[i][d]
		}
		w.index[d] = r % w.shape[d]
		r /= w.shape[d]
		for i := range maxOperands {
			w.off[i] += w.index[d] * w.step[d][i]
		}
	}
}

// next moves w to the following row.
func (w *walker) next() {
	for d := w.outer - 1; d >= 0; d-- {
		w.index[d]++
		for i := range maxOperands {
			w.off[i] += w.step[d][i]
		}
		if w.index[d] < w.shape[d] {
			return
		}
		for i := range maxOperands {
			w.off[i] -= w.shape[d] * w.step[d][i]
		}
		w.index[d] = 0
	}
}

// each calls fn with every operand's starting offset for rows [lo, hi).
func (l *layout) each(lo, hi int, fn func(off [maxOperands]int)) {
	if lo >= hi {
		return
	}
	if len(l.shape)-1 <= maxWalkDims {
		var w walker
		w.start(l, lo)
		for row := lo; row < hi; row++ {
			fn(w.off)
			w.next()
		}
		return
	}
	outer := len(l.shape) - 1
	index := make([]int, outer)
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
