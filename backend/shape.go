package backend

import (
	"fmt"
	"strings"
)

// Shape is the extent of each axis of an array, outermost first. A Shape of
// length 0 is a scalar (one element).
type Shape []int

// NumElements is the product of the extents (1 for a scalar).
func (s Shape) NumElements() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether s and o have the same rank and extents.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy of s that shares no memory with it.
func (s Shape) Clone() Shape {
	if s == nil {
		return Shape{}
	}
	return append(Shape(make([]int, 0, len(s))), s...)
}

// String formats s as "[2 3 4]".
func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// ContiguousStrides returns the row-major (C order) strides, in elements, of
// an array of shape s.
func ContiguousStrides(s Shape) []int {
	st := make([]int, len(s))
	acc := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

// BroadcastShapes returns the shape that a and b broadcast to under NumPy's
// rules: shapes are aligned on the right, and an extent of 1 stretches to
// match the other.
func BroadcastShapes(a, b Shape) (Shape, error) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("backend: shapes %v and %v do not broadcast (axis %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}
