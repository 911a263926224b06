package cpu

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

// Reductions accumulate in float64 with Neumaier's compensated summation
// (Neumaier 1974, an improved Kahan–Babuška sum), so the error of a sum does
// not grow with its length. Each output's terms are added in the row-major
// order of the reduced axes, in fixed blocks of reduceBlock terms whose
// partial sums are then added in order: the result depends on the shapes and
// strides only, never on the number of threads. (On the vector kernel
// paths a contiguous run of float32 terms is summed in 8 or 4 interleaved
// compensated lanes, merged in order: still a fixed order.) Var makes two
// passes (the mean, then the sum of squared deviations from it).

// reduceBlock is the number of terms of one output that one task sums.
const reduceBlock = 1 << 14

// pass names what one sweep over the reduced elements computes.
type pass uint8

const (
	passSum   pass = iota // Σ x
	passSqDev             // Σ (x − mean)²
	passMax               // the first maximum and its position (NaN is largest)
	passMin               // the first minimum and its position (NaN is smallest)
)

// acc is the state of one output during a pass: a compensated sum s + c, or
// the best value s at position i.
type acc struct {
	s, c float64
	i    int
}

// value returns a sum's total. A sum that reached ±Inf or NaN ignores the
// compensation, which is then NaN.
func (a acc) value() float64 {
	if math.IsInf(a.s, 0) || math.IsNaN(a.s) {
		return a.s
	}
	return a.s + a.c
}

// better reports whether v replaces best in a max (or min) pass.
func better(v, best float64, isMin bool) bool {
	if v != v {
		return best == best
	}
	if isMin {
		return v < best
	}
	return v > best
}

// merge folds the partial result b of a later block into a.
func (a *acc) merge(p pass, b acc) {
	switch p {
	case passSum, passSqDev:
		t := a.s + b.s
		if math.Abs(a.s) >= math.Abs(b.s) {
			a.c += (a.s - t) + b.s
		} else {
			a.c += (b.s - t) + a.s
		}
		a.s = t
		a.c += b.c
	default:
		if a.i < 0 || (b.i >= 0 && better(b.s, a.s, p == passMin)) {
			*a = b
		}
	}
}

// sweepRun adds n elements of x, from o with stride st, to a. pos is the
// reduced position of the first element; mean is used by passSqDev.
func sweepRun[T float](p pass, x []T, o, st, n, pos int, mean float64, a *acc) {
	if p == passSum && st == 1 {
		if x32, ok := any(x).([]float32); ok {
			k := sumRunVec(x32[o:o+n], a)
			o, n, pos = o+k, n-k, pos+k
		}
	}
	switch p {
	case passSum, passSqDev:
		s, c := a.s, a.c
		for range n {
			v := float64(x[o])
			if p == passSqDev {
				v -= mean
				v *= v
			}
			t := s + v
			if math.Abs(s) >= math.Abs(v) {
				c += (s - t) + v
			} else {
				c += (v - t) + s
			}
			s = t
			o += st
		}
		a.s, a.c = s, c
	default:
		isMin := p == passMin
		best, bi := a.s, a.i
		for k := range n {
			v := float64(x[o])
			if bi < 0 || better(v, best, isMin) {
				best, bi = v, pos+k
			}
			o += st
		}
		a.s, a.i = best, bi
	}
}

// sweepColumns folds one reduced position r (elements from xo with stride
// xs) into the accumulators of m adjacent outputs.
func sweepColumns[T float](p pass, x []T, xo, xs int, s, c, mean []float64, idx []int, r int) {
	if p == passSum && xs == 1 {
		if x32, ok := any(x).([]float32); ok {
			k := sumColumnsVec(x32[xo:xo+len(s)], s, c)
			s, c, xo = s[k:], c[k:], xo+k
		}
	}
	switch p {
	case passSum, passSqDev:
		for k := range s {
			v := float64(x[xo])
			if p == passSqDev {
				v -= mean[k]
				v *= v
			}
			t := s[k] + v
			if math.Abs(s[k]) >= math.Abs(v) {
				c[k] += (s[k] - t) + v
			} else {
				c[k] += (v - t) + s[k]
			}
			s[k] = t
			xo += xs
		}
	default:
		isMin := p == passMin
		for k := range s {
			v := float64(x[xo])
			if r == 0 || better(v, s[k], isMin) {
				s[k], idx[k] = v, r
			}
			xo += xs
		}
	}
}

// reduction is x split into the axes kept (outer, the outputs) and the axes
// reduced.
type reduction struct {
	kept, red               backend.Shape
	keptStrides, redStrides []int
	offset                  int
	k, r                    int // numbers of outputs and of terms per output
}

func offsetAt(shape backend.Shape, strides []int, flat int) int {
	off := 0
	for d := len(shape) - 1; d >= 0; d-- {
		off += (flat % shape[d]) * strides[d]
		flat /= shape[d]
	}
	return off
}

// columnar reports whether to reduce by sweeping rows of outputs (the
// innermost axis in memory is kept and long) rather than one output at a
// time.
func (rd *reduction) columnar() bool {
	minKept, minRed := math.MaxInt, math.MaxInt
	for i, d := range rd.kept {
		if d > 1 && rd.keptStrides[i] > 0 {
			minKept = min(minKept, rd.keptStrides[i])
		}
	}
	for i, d := range rd.red {
		if d > 1 && rd.redStrides[i] > 0 {
			minRed = min(minRed, rd.redStrides[i])
		}
	}
	if minKept > minRed {
		return false
	}
	kl := newLayout(rd.kept, backend.View{Shape: rd.kept, Strides: rd.keptStrides})
	n, _ := kl.inner()
	return n >= 32
}

// runPass performs pass p over x and returns one accumulator per output.
func runPass[T float](rd *reduction, p pass, x []T, mean []float64) []acc {
	out := make([]acc, rd.k)
	if rd.columnar() {
		s := make([]float64, rd.k)
		c := make([]float64, rd.k)
		if x32, ok := any(x).([]float32); ok && p == passSum && sumRows4(rd, x32, s, c) {
			for k := range out {
				out[k] = acc{s: s[k], c: c[k]}
			}
			return out
		}
		idx := make([]int, rd.k)
		kl := newLayout(rd.kept,
			backend.View{Shape: rd.kept, Strides: rd.keptStrides},
			backend.View{Shape: rd.kept, Strides: backend.ContiguousStrides(rd.kept)})
		_, kstep := kl.inner()
		rl := newLayout(rd.red, backend.View{Shape: rd.red, Strides: rd.redStrides, Offset: rd.offset})
		_, rstep := rl.inner()
		parallelFor(rd.k, max(1, grainElems/max(rd.r, 1)), func(k0, k1 int) {
			r := 0
			runs(&rl, 0, rd.r, func(off [maxOperands]int, n int) {
				for j := range n {
					l := kl
					l.offset[0] = off[0] + j*rstep[0]
					runs(&l, k0, k1, func(o [maxOperands]int, m int) {
						a := o[1]
						var mn []float64
						if mean != nil {
							mn = mean[a : a+m]
						}
						sweepColumns(p, x, o[0], kstep[0], s[a:a+m], c[a:a+m], mn, idx[a:a+m], r)
					})
					r++
				}
			})
		})
		for k := range out {
			out[k] = acc{s: s[k], c: c[k], i: idx[k]}
		}
		return out
	}
	nb := max(1, (rd.r+reduceBlock-1)/reduceBlock)
	rl := newLayout(rd.red, backend.View{Shape: rd.red, Strides: rd.redStrides})
	n, rstep := rl.inner()
	if nb == 1 && rl.rows() == 1 {
		// Each output's terms form one strided run: walk the outputs
		// directly.
		kl := newLayout(rd.kept, backend.View{Shape: rd.kept, Strides: rd.keptStrides, Offset: rd.offset})
		_, kstep := kl.inner()
		parallelFor(rd.k, max(1, grainElems/max(1, rd.r)), func(lo, hi int) {
			o := lo
			runs(&kl, lo, hi, func(off [maxOperands]int, m int) {
				for t := range m {
					a := acc{i: -1}
					mn := 0.0
					if mean != nil {
						mn = mean[o]
					}
					sweepRun(p, x, off[0]+t*kstep[0], rstep[0], n, 0, mn, &a)
					out[o] = a
					o++
				}
			})
		})
		return out
	}
	parts := out
	if nb > 1 {
		parts = make([]acc, rd.k*nb)
	}
	parallelFor(len(parts), max(1, grainElems/max(1, min(rd.r, reduceBlock))), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			o, b := t/nb, t%nb
			l := rl
			l.offset[0] = rd.offset + offsetAt(rd.kept, rd.keptStrides, o)
			a := acc{i: -1}
			m := 0.0
			if mean != nil {
				m = mean[o]
			}
			r0 := b * reduceBlock
			pos := r0
			runs(&l, r0, min(rd.r, r0+reduceBlock), func(off [maxOperands]int, n int) {
				sweepRun(p, x, off[0], rstep[0], n, pos, m, &a)
				pos += n
			})
			parts[t] = a
		}
	})
	if nb > 1 {
		for o := range out {
			a := parts[o*nb]
			for b := 1; b < nb; b++ {
				a.merge(p, parts[o*nb+b])
			}
			out[o] = a
		}
	}
	return out
}

// sumRows4 is runPass's columnar sum for the common case of one
// contiguous kept axis and one reduced axis of positive stride (a bias
// gradient: [N, C] summed over N): four rows at a time are folded into
// each column by the vector kernel, in row order, so the sums equal the
// row-by-row sweep's bit for bit. It reports false, doing nothing, where
// that case or the kernel does not apply.
func sumRows4(rd *reduction, x []float32, s, c []float64) bool {
	if !hasColumns4Vec() || len(rd.kept) != 1 || rd.keptStrides[0] != 1 || len(rd.red) != 1 || rd.redStrides[0] < rd.k {
		return false
	}
	rs, n := rd.redStrides[0], rd.r
	parallelFor(rd.k, max(1, grainElems/max(n, 1)), func(k0, k1 int) {
		ss, cc := s[k0:k1], c[k0:k1]
		r := 0
		for ; r+4 <= n; r += 4 {
			o := rd.offset + r*rs + k0
			v := sumColumns4Vec(x[o:], rs, ss, cc)
			for q := range 4 {
				sweepColumns(passSum, x, o+q*rs+v, 1, ss[v:], cc[v:], nil, nil, r+q)
			}
		}
		for ; r < n; r++ {
			sweepColumns(passSum, x, rd.offset+r*rs+k0, 1, ss, cc, nil, nil, r)
		}
	})
	return true
}

func extremum(isMin bool) pass {
	if isMin {
		return passMin
	}
	return passMax
}

func reduceFloat[T float](op backend.ReduceOp, dst backend.View, x []T, rd *reduction, p backend.ReduceParams) {
	var d []T
	if op != backend.ArgMax && op != backend.ArgMin {
		d = sliceOf[T](dst)[dst.Offset : dst.Offset+rd.k]
	}
	switch op {
	case backend.Sum, backend.Mean:
		a := runPass(rd, passSum, x, nil)
		scale := 1.0
		if op == backend.Mean {
			scale = float64(rd.r)
		}
		for o := range d {
			d[o] = T(a[o].value() / scale)
		}
	case backend.Var:
		a := runPass(rd, passSum, x, nil)
		mean := make([]float64, rd.k)
		for o := range mean {
			mean[o] = a[o].value() / float64(rd.r)
		}
		a = runPass(rd, passSqDev, x, mean)
		den := float64(max(rd.r-p.Correction, 0))
		for o := range d {
			d[o] = T(a[o].value() / den)
		}
	case backend.Max, backend.Min:
		a := runPass(rd, extremum(op == backend.Min), x, nil)
		for o := range d {
			d[o] = T(a[o].s)
		}
	case backend.ArgMax, backend.ArgMin:
		a := runPass(rd, extremum(op == backend.ArgMin), x, nil)
		di := I64(dst)[dst.Offset : dst.Offset+rd.k]
		for o := range di {
			di[o] = int64(a[o].i)
		}
	}
}

// Reduce implements backend.Backend for Float32 and Float64 x. ArgMax and
// ArgMin write Int64; the other reductions write x's dtype. Max, Min,
// ArgMax and ArgMin propagate NaN (NaN counts as the extreme, and the first
// NaN's position is the argument), as PyTorch does.
func (c *Backend) Reduce(op backend.ReduceOp, dst, x backend.View, axes []int, p backend.ReduceParams) error {
	if err := checkHostView("reduce", "dst", dst); err != nil {
		return err
	}
	if err := checkHostView("reduce", "x", x); err != nil {
		return err
	}
	if op > backend.Var {
		return fmt.Errorf("cpu: reduce: unknown op %d", op)
	}
	if x.DType != backend.Float32 && x.DType != backend.Float64 {
		return fmt.Errorf("cpu: reduce: dtype %v", x.DType)
	}
	want := x.DType
	if op == backend.ArgMax || op == backend.ArgMin {
		want = backend.Int64
		if len(axes) != 1 {
			return fmt.Errorf("cpu: reduce: arg-reduction over %d axes %v, want one", len(axes), axes)
		}
	}
	if dst.DType != want {
		return fmt.Errorf("cpu: reduce: dst dtype %v, want %v", dst.DType, want)
	}
	rd := reduction{offset: x.Offset, kept: backend.Shape{}, red: backend.Shape{}}
	next := 0
	for i, a := range axes {
		if a < 0 || a >= len(x.Shape) || (i > 0 && a <= axes[i-1]) {
			return fmt.Errorf("cpu: reduce: axes %v for shape %v must be sorted, distinct and in range", axes, x.Shape)
		}
	}
	for d := range x.Shape {
		if next < len(axes) && axes[next] == d {
			rd.red = append(rd.red, x.Shape[d])
			rd.redStrides = append(rd.redStrides, x.Strides[d])
			next++
		} else {
			rd.kept = append(rd.kept, x.Shape[d])
			rd.keptStrides = append(rd.keptStrides, x.Strides[d])
		}
	}
	if !dst.Shape.Equal(rd.kept) || !dst.IsContiguous() {
		return fmt.Errorf("cpu: reduce: dst shape %v, strides %v; want contiguous %v for x %v over axes %v", dst.Shape, dst.Strides, rd.kept, x.Shape, axes)
	}
	rd.k, rd.r = rd.kept.NumElements(), rd.red.NumElements()
	if rd.k == 0 {
		return nil
	}
	if rd.r == 0 {
		switch op {
		case backend.Sum:
			return c.Fill(dst, 0)
		case backend.Mean, backend.Var:
			return c.Fill(dst, math.NaN())
		}
		return fmt.Errorf("cpu: reduce: op %d over empty axes %v of shape %v", op, axes, x.Shape)
	}
	if x.DType == backend.Float32 {
		reduceFloat(op, dst, F32(x), &rd, p)
	} else {
		reduceFloat(op, dst, F64(x), &rd, p)
	}
	return nil
}
