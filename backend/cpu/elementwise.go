package cpu

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

// grainElems is the fewest elements of cheap elementwise work worth a
// goroutine of its own.
const grainElems = 1 << 15

// chunkElems is how many elements of a strided run are gathered into
// contiguous scratch memory at a time.
const chunkElems = 256

// walk runs body over the flat element range of l split between
// goroutines when it is large.
func walk(l *layout, body func(lo, hi int)) {
	n, _ := l.inner()
	parallelFor(l.rows()*n, grainElems, body)
}

// runs calls fn for the runs of l that cover its flat elements [lo, hi), in
// row-major order, with each operand's offset at the run's start and the
// run's length.
func runs(l *layout, lo, hi int, fn func(off [maxOperands]int, n int)) {
	n, step := l.inner()
	if n == 0 || lo >= hi {
		return
	}
	r0, c0 := lo/n, lo%n
	r1 := (hi + n - 1) / n
	last := hi - (r1-1)*n
	part := func(off [maxOperands]int, row int) {
		a, b := 0, n
		if row == r0 {
			a = c0
		}
		if row == r1-1 {
			b = last
		}
		for i := range maxOperands {
			off[i] += a * step[i]
		}
		fn(off, b-a)
	}
	if len(l.shape)-1 > maxWalkDims {
		row := r0
		l.each(r0, r1, func(off [maxOperands]int) {
			part(off, row)
			row++
		})
		return
	}
	var w walker
	w.start(l, r0)
	part(w.off, r0)
	if r1-r0 == 1 {
		return
	}
	w.next()
	for row := r0 + 1; row < r1-1; row++ {
		fn(w.off, n)
		w.next()
	}
	part(w.off, r1-1)
}

// loadRun returns the m elements of s that start at off, stride st: a subslice
// when they are adjacent, otherwise a copy in *buf.
func loadRun[T any](s []T, off, st, m int, buf *[]T) []T {
	if st == 1 {
		return s[off : off+m : off+m]
	}
	if *buf == nil {
		*buf = make([]T, chunkElems)
	}
	b := (*buf)[:m]
	for i := range b {
		b[i] = s[off]
		off += st
	}
	return b
}

// outRun returns where to write m elements of d that start at off, stride st:
// d itself when adjacent, otherwise scratch memory to be stored with storeRun.
func outRun[T any](d []T, off, st, m int, buf *[]T) []T {
	if st == 1 {
		return d[off : off+m : off+m]
	}
	if *buf == nil {
		*buf = make([]T, chunkElems)
	}
	return (*buf)[:m]
}

func storeRun[T any](d []T, off, st int, v []T) {
	if st == 1 {
		return
	}
	for _, x := range v {
		d[off] = x
		off += st
	}
}

// chunkLen is how many elements of a run of length n to hand a kernel at
// once: all of them when every operand is adjacent.
func chunkLen(step [maxOperands]int, k int) int {
	for i := 0; i < k; i++ {
		if step[i] != 1 {
			return chunkElems
		}
	}
	return math.MaxInt
}

// map2 applies kern to contiguous pieces of d and s, which l (operands d, s)
// walks.
func map2[D, S any](l *layout, d []D, s []S, kern func(d []D, s []S)) {
	_, step := l.inner()
	cl := chunkLen(step, 2)
	walk(l, func(lo, hi int) {
		var bd []D
		var bs []S
		runs(l, lo, hi, func(off [maxOperands]int, n int) {
			for c := 0; c < n; c += cl {
				m := min(cl, n-c)
				xs := loadRun(s, off[1]+c*step[1], step[1], m, &bs)
				ys := outRun(d, off[0]+c*step[0], step[0], m, &bd)
				kern(ys, xs)
				storeRun(d, off[0]+c*step[0], step[0], ys)
			}
		})
	})
}

// map3 is map2 for two inputs.
func map3[D, A, B any](l *layout, d []D, a []A, b []B, kern func(d []D, a []A, b []B)) {
	_, step := l.inner()
	cl := chunkLen(step, 3)
	walk(l, func(lo, hi int) {
		var bd []D
		var ba []A
		var bb []B
		runs(l, lo, hi, func(off [maxOperands]int, n int) {
			for c := 0; c < n; c += cl {
				m := min(cl, n-c)
				as := loadRun(a, off[1]+c*step[1], step[1], m, &ba)
				bs := loadRun(b, off[2]+c*step[2], step[2], m, &bb)
				ys := outRun(d, off[0]+c*step[0], step[0], m, &bd)
				kern(ys, as, bs)
				storeRun(d, off[0]+c*step[0], step[0], ys)
			}
		})
	})
}

// map4 is map2 for three inputs.
func map4[D, C, A, B any](l *layout, d []D, cnd []C, a []A, b []B, kern func(d []D, c []C, a []A, b []B)) {
	_, step := l.inner()
	cl := chunkLen(step, 4)
	walk(l, func(lo, hi int) {
		var bd []D
		var bc []C
		var ba []A
		var bb []B
		runs(l, lo, hi, func(off [maxOperands]int, n int) {
			for c := 0; c < n; c += cl {
				m := min(cl, n-c)
				cs := loadRun(cnd, off[1]+c*step[1], step[1], m, &bc)
				as := loadRun(a, off[2]+c*step[2], step[2], m, &ba)
				bs := loadRun(b, off[3]+c*step[3], step[3], m, &bb)
				ys := outRun(d, off[0]+c*step[0], step[0], m, &bd)
				kern(ys, cs, as, bs)
				storeRun(d, off[0]+c*step[0], step[0], ys)
			}
		})
	})
}

// checkOperands validates views of one kernel: each must be well-formed and
// of dst's shape.
func checkOperands(kernel string, dst backend.View, names []string, ins ...backend.View) error {
	if err := checkHostView(kernel, "dst", dst); err != nil {
		return err
	}
	for i, v := range ins {
		if err := checkHostView(kernel, names[i], v); err != nil {
			return err
		}
		if !v.Shape.Equal(dst.Shape) {
			return fmt.Errorf("cpu: %s: %s shape %v, dst shape %v", kernel, names[i], v.Shape, dst.Shape)
		}
	}
	return nil
}

type float interface{ ~float32 | ~float64 }

type integer interface{ ~int32 | ~int64 }

const (
	sqrt1_2   = 0.70710678118654752440084436210484903928483593768847 // 1/√2
	sqrt2OnPi = 0.79788456080286535587989211986876373695171726232986 // √(2/π)
)

// unaryFloat computes d = op(x) elementwise; d and x have equal lengths and
// may be the same slice.
func unaryFloat[T float](op backend.UnaryOp, d, x []T, arg float64) {
	x = x[:len(d)]
	switch op {
	case backend.Neg:
		for i, v := range x {
			d[i] = -v
		}
	case backend.Exp:
		for i, v := range x {
			d[i] = T(math.Exp(float64(v)))
		}
	case backend.Log:
		for i, v := range x {
			d[i] = T(math.Log(float64(v)))
		}
	case backend.Sqrt:
		for i, v := range x {
			d[i] = T(math.Sqrt(float64(v)))
		}
	case backend.Rsqrt:
		for i, v := range x {
			d[i] = T(1 / math.Sqrt(float64(v)))
		}
	case backend.Tanh:
		for i, v := range x {
			d[i] = T(math.Tanh(float64(v)))
		}
	case backend.Sigmoid:
		for i, v := range x {
			d[i] = T(1 / (1 + math.Exp(-float64(v))))
		}
	case backend.ReLU:
		for i, v := range x {
			if v < 0 {
				v = 0
			}
			d[i] = v
		}
	case backend.GELU:
		// x·Φ(x) with Φ(x) = erfc(−x/√2)/2, which keeps its relative
		// accuracy in the left tail where 1 + erf(x/√2) cancels.
		for i, v := range x {
			f := float64(v)
			d[i] = T(0.5 * f * math.Erfc(-f*sqrt1_2))
		}
	case backend.GELUTanh:
		for i, v := range x {
			f := float64(v)
			d[i] = T(0.5 * f * (1 + math.Tanh(sqrt2OnPi*(f+0.044715*f*f*f))))
		}
	case backend.Abs:
		for i, v := range x {
			d[i] = T(math.Abs(float64(v)))
		}
	case backend.Sign:
		for i, v := range x {
			var s T
			if v > 0 {
				s = 1
			} else if v < 0 {
				s = -1
			}
			d[i] = s
		}
	case backend.Erf:
		for i, v := range x {
			d[i] = T(math.Erf(float64(v)))
		}
	case backend.Reciprocal:
		for i, v := range x {
			d[i] = 1 / v
		}
	case backend.Square:
		for i, v := range x {
			d[i] = v * v
		}
	case backend.PowScalar:
		switch arg {
		case 1:
			copy(d, x)
		case 2:
			for i, v := range x {
				d[i] = v * v
			}
		default:
			for i, v := range x {
				d[i] = T(math.Pow(float64(v), arg))
			}
		}
	case backend.AddScalar:
		s := T(arg)
		for i, v := range x {
			d[i] = v + s
		}
	case backend.MulScalar:
		s := T(arg)
		for i, v := range x {
			d[i] = v * s
		}
	}
}

// unaryInt computes the integer unary ops (Neg, Abs, Sign, Square, ReLU).
func unaryInt[T integer](op backend.UnaryOp, d, x []T) {
	x = x[:len(d)]
	switch op {
	case backend.Neg:
		for i, v := range x {
			d[i] = -v
		}
	case backend.Abs:
		for i, v := range x {
			if v < 0 {
				v = -v
			}
			d[i] = v
		}
	case backend.Sign:
		for i, v := range x {
			var s T
			if v > 0 {
				s = 1
			} else if v < 0 {
				s = -1
			}
			d[i] = s
		}
	case backend.Square:
		for i, v := range x {
			d[i] = v * v
		}
	case backend.ReLU:
		for i, v := range x {
			d[i] = max(v, 0)
		}
	}
}

func intUnary(op backend.UnaryOp) bool {
	switch op {
	case backend.Neg, backend.Abs, backend.Sign, backend.Square, backend.ReLU:
		return true
	}
	return false
}

// Unary implements backend.Backend. Every op accepts Float32 and Float64;
// Neg, Abs, Sign, Square and ReLU also accept Int32 and Int64. Sign(NaN) is
// 0 and ReLU(NaN) is NaN, as in PyTorch. float32 results are the float64
// function of the float32 input, rounded once, except that on the vector
// kernel paths float32 GELU is computed in float32 arithmetic (within a
// relative 10⁻⁵, tails included; elementwise_amd64.s).
func (c *Backend) Unary(op backend.UnaryOp, dst, x backend.View, arg float64) error {
	if err := checkOperands("unary", dst, []string{"x"}, x); err != nil {
		return err
	}
	if dst.DType != x.DType {
		return fmt.Errorf("cpu: unary: dst dtype %v, x dtype %v", dst.DType, x.DType)
	}
	if op >= backend.UnaryOp(numUnaryOps) {
		return fmt.Errorf("cpu: unary: unknown op %d", op)
	}
	l := newLayout(dst.Shape, dst, x)
	switch dst.DType {
	case backend.Float32:
		map2(&l, F32(dst), F32(x), func(d, s []float32) {
			if !unaryVec(op, d, s, arg) {
				unaryFloat(op, d, s, arg)
			}
		})
	case backend.Float64:
		map2(&l, F64(dst), F64(x), func(d, s []float64) { unaryFloat(op, d, s, arg) })
	case backend.Int32, backend.Int64:
		if !intUnary(op) {
			return fmt.Errorf("cpu: unary: op %d on %v", op, dst.DType)
		}
		if dst.DType == backend.Int32 {
			map2(&l, I32(dst), I32(x), func(d, s []int32) { unaryInt(op, d, s) })
		} else {
			map2(&l, I64(dst), I64(x), func(d, s []int64) { unaryInt(op, d, s) })
		}
	default:
		return fmt.Errorf("cpu: unary: dtype %v", dst.DType)
	}
	return nil
}

// numUnaryOps and numBinaryOps bound the op enums (the backend's own
// counters are unexported).
const (
	numUnaryOps  = int(backend.MulScalar) + 1
	numBinaryOps = int(backend.SigmoidGrad) + 1
)

const (
	rsqrt2Pi = 0.39894228040143267793994605993438186847585863116493 // 1/√(2π)
	geluC    = 0.044715                                             // of GELUTanh
)

// binaryF32 is binaryFloat for float32, through the vector loops where the
// kernel path has them.
func binaryF32(op backend.BinaryOp, d, a, b []float32) {
	if !binaryVec(op, d, a, b) {
		binaryFloat(op, d, a, b)
	}
}

// binaryScalarRuns computes Add, Sub and Mul when one operand is constant
// along each run of l (stride 0, as a per-channel bias is) and the other
// and dst are adjacent: each run is then a scalar op (a − s as a + (−s),
// which IEEE arithmetic defines it to be). It reports false, doing nothing,
// for other ops and layouts.
func binaryScalarRuns(op backend.BinaryOp, l *layout, d, a, b []float32) bool {
	if op != backend.Add && op != backend.Sub && op != backend.Mul {
		return false
	}
	n, step := l.inner()
	if n < 16 || step[0] != 1 {
		return false
	}
	var scalarB bool
	switch {
	case step[1] == 1 && step[2] == 0:
		scalarB = true
	case step[1] == 0 && step[2] == 1 && op != backend.Sub:
	default:
		return false
	}
	walk(l, func(lo, hi int) {
		runs(l, lo, hi, func(off [maxOperands]int, m int) {
			var x []float32
			var s float32
			if scalarB {
				x, s = a[off[1]:off[1]+m], b[off[2]]
			} else {
				x, s = b[off[2]:off[2]+m], a[off[1]]
			}
			u, arg := backend.AddScalar, float64(s)
			switch op {
			case backend.Sub:
				arg = -arg
			case backend.Mul:
				u = backend.MulScalar
			}
			dr := d[off[0] : off[0]+m]
			if !unaryVec(u, dr, x, arg) {
				unaryFloat(u, dr, x, arg)
			}
		})
	})
	return true
}

// binaryFloat computes d = op(a, b) for the arithmetic ops and the
// activation gradients. Maximum and Minimum propagate NaN.
func binaryFloat[T float](op backend.BinaryOp, d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case backend.ReLUGrad:
		for i := range d {
			var g T
			if b[i] > 0 {
				g = a[i]
			}
			d[i] = g
		}
	case backend.GELUGrad:
		for i := range d {
			x := float64(b[i])
			cdf := 0.5 * math.Erfc(-x*sqrt1_2)
			pdf := rsqrt2Pi * math.Exp(-0.5*x*x)
			d[i] = T(float64(a[i]) * (cdf + x*pdf))
		}
	case backend.GELUTanhGrad:
		for i := range d {
			x := float64(b[i])
			t := math.Tanh(sqrt2OnPi * (x + geluC*x*x*x))
			dy := 0.5*(1+t) + 0.5*x*(1-t*t)*sqrt2OnPi*(1+3*geluC*x*x)
			d[i] = T(float64(a[i]) * dy)
		}
	case backend.TanhGrad:
		for i := range d {
			y := float64(b[i])
			d[i] = T(float64(a[i]) * (1 - y*y))
		}
	case backend.SigmoidGrad:
		for i := range d {
			y := float64(b[i])
			d[i] = T(float64(a[i]) * y * (1 - y))
		}
	case backend.Add:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case backend.Sub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case backend.Mul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case backend.Div:
		for i := range d {
			d[i] = a[i] / b[i]
		}
	case backend.Maximum:
		for i := range d {
			x, y := a[i], b[i]
			if x != x || x > y {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	case backend.Minimum:
		for i := range d {
			x, y := a[i], b[i]
			if x != x || x < y {
				d[i] = x
			} else {
				d[i] = y
			}
		}
	case backend.Pow:
		for i := range d {
			d[i] = T(math.Pow(float64(a[i]), float64(b[i])))
		}
	}
}

// binaryInt computes Add, Sub, Mul, Maximum and Minimum on integers
// (wrapping on overflow).
func binaryInt[T integer](op backend.BinaryOp, d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case backend.Add:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case backend.Sub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case backend.Mul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case backend.Maximum:
		for i := range d {
			d[i] = max(a[i], b[i])
		}
	case backend.Minimum:
		for i := range d {
			d[i] = min(a[i], b[i])
		}
	}
}

// compare writes 1 where a op b holds and 0 elsewhere (IEEE semantics: every
// comparison with NaN is false except Ne).
func compare[T float | integer](op backend.BinaryOp, d []uint8, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case backend.Eq:
		for i := range d {
			d[i] = b2u(a[i] == b[i])
		}
	case backend.Ne:
		for i := range d {
			d[i] = b2u(a[i] != b[i])
		}
	case backend.Lt:
		for i := range d {
			d[i] = b2u(a[i] < b[i])
		}
	case backend.Le:
		for i := range d {
			d[i] = b2u(a[i] <= b[i])
		}
	case backend.Gt:
		for i := range d {
			d[i] = b2u(a[i] > b[i])
		}
	case backend.Ge:
		for i := range d {
			d[i] = b2u(a[i] >= b[i])
		}
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func binaryTyped[T float | integer](op backend.BinaryOp, l *layout, dst backend.View, a, b []T, arith func(op backend.BinaryOp, d, a, b []T)) {
	if op.IsComparison() {
		map3(l, U8(dst), a, b, func(d []uint8, x, y []T) { compare(op, d, x, y) })
		return
	}
	map3(l, sliceOf[T](dst), a, b, func(d, x, y []T) { arith(op, d, x, y) })
}

// Binary implements backend.Backend, the activation gradients included
// (float32 results are the float64 formula of the float32 operands, rounded
// once; on the vector kernel paths float32 GELUGrad is computed in float32
// arithmetic, within 10⁻⁵ of the size of its terms).
func (c *Backend) Binary(op backend.BinaryOp, dst, a, b backend.View) error {
	if err := checkOperands("binary", dst, []string{"a", "b"}, a, b); err != nil {
		return err
	}
	if int(op) >= numBinaryOps {
		return fmt.Errorf("cpu: binary: unknown op %d", op)
	}
	if a.DType != b.DType {
		return fmt.Errorf("cpu: binary: operand dtypes %v and %v", a.DType, b.DType)
	}
	want := a.DType
	if op.IsComparison() {
		want = backend.Bool
	}
	if dst.DType != want {
		return fmt.Errorf("cpu: binary: dst dtype %v, want %v", dst.DType, want)
	}
	l := newLayout(dst.Shape, dst, a, b)
	switch a.DType {
	case backend.Float32:
		if !binaryScalarRuns(op, &l, F32(dst), F32(a), F32(b)) {
			binaryTyped(op, &l, dst, F32(a), F32(b), binaryF32)
		}
	case backend.Float64:
		binaryTyped(op, &l, dst, F64(a), F64(b), binaryFloat[float64])
	case backend.Int32, backend.Int64:
		if op == backend.Div || op == backend.Pow || op.IsActivationGrad() {
			return fmt.Errorf("cpu: binary: op %d on %v", op, a.DType)
		}
		if a.DType == backend.Int32 {
			binaryTyped(op, &l, dst, I32(a), I32(b), binaryInt[int32])
		} else {
			binaryTyped(op, &l, dst, I64(a), I64(b), binaryInt[int64])
		}
	default:
		return fmt.Errorf("cpu: binary: dtype %v", a.DType)
	}
	return nil
}

func selectRow[T any](d []T, c []uint8, a, b []T) {
	c, a, b = c[:len(d)], a[:len(d)], b[:len(d)]
	for i := range d {
		if c[i] != 0 {
			d[i] = a[i]
		} else {
			d[i] = b[i]
		}
	}
}

func where[T any](l *layout, d []T, cond []uint8, a, b []T) {
	map4(l, d, cond, a, b, selectRow[T])
}

// Where implements backend.Backend for every dtype.
func (c *Backend) Where(dst, cond, a, b backend.View) error {
	if err := checkOperands("where", dst, []string{"cond", "a", "b"}, cond, a, b); err != nil {
		return err
	}
	if cond.DType != backend.Bool {
		return fmt.Errorf("cpu: where: cond dtype %v, want bool", cond.DType)
	}
	if a.DType != dst.DType || b.DType != dst.DType {
		return fmt.Errorf("cpu: where: dtypes dst %v, a %v, b %v", dst.DType, a.DType, b.DType)
	}
	l := newLayout(dst.Shape, dst, cond, a, b)
	switch dst.DType.Size() {
	case 1:
		where(&l, U8(dst), U8(cond), U8(a), U8(b))
	case 2:
		where(&l, sliceOf[uint16](dst), U8(cond), sliceOf[uint16](a), sliceOf[uint16](b))
	case 4:
		where(&l, sliceOf[uint32](dst), U8(cond), sliceOf[uint32](a), sliceOf[uint32](b))
	case 8:
		where(&l, sliceOf[uint64](dst), U8(cond), sliceOf[uint64](a), sliceOf[uint64](b))
	}
	return nil
}
