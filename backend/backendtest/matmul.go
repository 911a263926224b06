package backendtest

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

func init() { register("MatMul", checkMatMul) }

// matOperand is a batch of matrices stored with padded rows, a non-zero
// offset and, on broadcast batch axes, stride 0.
type matOperand struct {
	view  backend.View
	vals  []float64 // row-major values of the stored (unbroadcast) array
	batch []int     // strides of the batch axes into vals (0 when broadcast)
	cols  int
}

// at returns the element (r, c) of the matrix at batch multi-index bi.
func (o *matOperand) at(bi []int, r, c int) float64 {
	off := 0
	for i, x := range bi {
		off += x * o.batch[i]
	}
	return o.vals[off+r*o.cols+c]
}

// newMatOperand makes a [batch..., rows, cols] operand; axes of batch marked
// in bcast are stored once and broadcast. pad adds elements at the end of
// every row.
func newMatOperand(e *Env, dt backend.DType, batch []int, bcast []bool, rows, cols, pad int, lo, hi float64) *matOperand {
	r := len(batch) + 2
	stored := make(backend.Shape, r)
	shape := make(backend.Shape, r)
	for i, d := range batch {
		shape[i], stored[i] = d, d
		if bcast != nil && bcast[i] {
			stored[i] = 1
		}
	}
	shape[r-2], shape[r-1] = rows, cols
	stored[r-2], stored[r-1] = rows, cols
	ld := cols + pad
	strides := make([]int, r)
	strides[r-1], strides[r-2] = 1, ld
	acc := rows * ld
	for i := r - 3; i >= 0; i-- {
		strides[i] = acc
		acc *= stored[i]
	}
	phys := e.alloc(dt, stored, strides, 5)
	vals := make([]float64, stored.NumElements())
	for i := range vals {
		vals[i] = Round(dt, lo+(hi-lo)*e.Rand.Float64())
	}
	e.Set(phys, vals)
	o := &matOperand{cols: cols, vals: vals, batch: make([]int, len(batch))}
	vst := make([]int, r)
	copy(vst, strides)
	acc = rows * cols
	for i := len(batch) - 1; i >= 0; i-- {
		if stored[i] == 1 && batch[i] != 1 {
			vst[i] = 0
		} else {
			o.batch[i] = acc
		}
		acc *= stored[i]
	}
	o.view = phys
	o.view.Shape = shape
	o.view.Strides = vst
	return o
}

// refMatMul is C = α·op(A)·op(B) + β·C0 for every batch index, in float64.
func refMatMul(batch []int, m, n, k int, a, b *matOperand, transA, transB bool, alpha, beta float64, c0 []float64) []float64 {
	nb := backend.Shape(batch).NumElements()
	out := make([]float64, nb*m*n)
	bi := make([]int, len(batch))
	for t := 0; t < nb; t++ {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for l := 0; l < k; l++ {
					var x, y float64
					if transA {
						x = a.at(bi, l, i)
					} else {
						x = a.at(bi, i, l)
					}
					if transB {
						y = b.at(bi, j, l)
					} else {
						y = b.at(bi, l, j)
					}
					s += x * y
				}
				o := (t*m+i)*n + j
				out[o] = alpha * s
				if beta != 0 {
					out[o] += beta * c0[o]
				}
			}
		}
		for d := len(bi) - 1; d >= 0; d-- {
			bi[d]++
			if bi[d] < batch[d] {
				break
			}
			bi[d] = 0
		}
	}
	return out
}

func checkMatMul(e *Env) {
	type tc struct {
		batch          []int
		bcastA, bcastB []bool
		m, n, k        int
		pad            int
		alpha, beta    float64
	}
	cases := []tc{
		{m: 0, n: 3, k: 4, alpha: 1},
		{m: 3, n: 0, k: 4, alpha: 1},
		{m: 3, n: 4, k: 0, alpha: 1},
		{m: 3, n: 4, k: 0, alpha: 1, beta: 0.5},
		{m: 1, n: 1, k: 1, alpha: 1},
		{m: 7, n: 5, k: 3, alpha: 1},
		{m: 7, n: 5, k: 3, pad: 3, alpha: -0.5, beta: 2},
		{m: 7, n: 5, k: 3, alpha: 0, beta: 0},
		{m: 1, n: 9, k: 6, alpha: 1},
		{m: 9, n: 1, k: 6, alpha: 1, beta: 1},
		{m: 67, n: 131, k: 261, pad: 1, alpha: 1},
		{m: 130, n: 70, k: 300, alpha: 0.25, beta: -1},
		{m: 20, n: 140, k: 600, pad: 2, alpha: 1, beta: 0.5},
		{batch: []int{3}, m: 5, n: 6, k: 7, alpha: 1},
		{batch: []int{0}, m: 5, n: 6, k: 7, alpha: 1},
		{batch: []int{2, 3}, bcastA: []bool{false, true}, m: 4, n: 5, k: 6, pad: 2, alpha: 1},
		{batch: []int{2, 3}, bcastB: []bool{true, true}, m: 4, n: 5, k: 6, alpha: 2, beta: 1},
		{batch: []int{4, 1, 2}, bcastA: []bool{true, false, false}, bcastB: []bool{false, false, true}, m: 3, n: 3, k: 2, alpha: 1},
		{batch: []int{97}, m: 8, n: 9, k: 10, alpha: 1},
		{batch: []int{3}, m: 80, n: 40, k: 70, alpha: 1, beta: 0.5},
	}
	for _, dt := range FloatTypes {
		for _, c := range cases {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				name := fmt.Sprintf("%v/batch%v/%dx%dx%d/trans%v/α%v β%v", dt, c.batch, c.m, c.n, c.k, tr, c.alpha, c.beta)
				ar, ac := c.m, c.k
				if tr[0] {
					ar, ac = ac, ar
				}
				br, bc := c.k, c.n
				if tr[1] {
					br, bc = bc, br
				}
				a := newMatOperand(e, dt, c.batch, c.bcastA, ar, ac, c.pad, -1, 1)
				b := newMatOperand(e, dt, c.batch, c.bcastB, br, bc, c.pad, -1, 1)
				shape := append(append(backend.Shape{}, c.batch...), c.m, c.n)
				var dst backend.View
				var c0 []float64
				if c.beta != 0 {
					dst, c0 = e.Random(dt, shape, false, -1, 1)
				} else {
					dst = e.Alloc(dt, shape)
				}
				p := backend.MatMulParams{TransA: tr[0], TransB: tr[1], Alpha: c.alpha, Beta: c.beta}
				if err := e.B.MatMul(dst, a.view, b.view, p); err != nil {
					e.T.Errorf("%s: %v", name, err)
					continue
				}
				want := refMatMul(c.batch, c.m, c.n, c.k, a, b, tr[0], tr[1], c.alpha, c.beta, c0)
				e.Close(name, e.Get(dst), want, Tol(dt)*8, Tol(dt)*float64(c.k+2))
			}
		}
	}
	checkMatMulErrors(e)
}

func checkMatMulErrors(e *Env) {
	dt := backend.Float32
	f := func(s ...int) backend.View { return e.Alloc(dt, s) }
	cases := []struct {
		name      string
		dst, a, b backend.View
		p         backend.MatMulParams
	}{
		{"inner mismatch", f(2, 3), f(2, 4), f(5, 3), backend.MatMulParams{Alpha: 1}},
		{"output mismatch", f(2, 4), f(2, 4), f(4, 3), backend.MatMulParams{Alpha: 1}},
		{"rank 1", f(3), f(3), f(3), backend.MatMulParams{Alpha: 1}},
		{"batch mismatch", f(2, 2, 3), f(3, 2, 4), f(2, 4, 3), backend.MatMulParams{Alpha: 1}},
		{"dtype mismatch", f(2, 3), e.Alloc(backend.Float64, backend.Shape{2, 4}), f(4, 3), backend.MatMulParams{Alpha: 1}},
		{"transposed inner axis", f(2, 3), e.Strided(dt, backend.Shape{2, 4}), f(4, 3), backend.MatMulParams{Alpha: 1}},
	}
	bdst := f(1, 2, 3)
	bdst.Shape, bdst.Strides = backend.Shape{4, 2, 3}, []int{0, 3, 1}
	cases = append(cases, struct {
		name      string
		dst, a, b backend.View
		p         backend.MatMulParams
	}{"broadcast dst", bdst, f(4, 2, 4), f(4, 4, 3), backend.MatMulParams{Alpha: 1}})
	for _, c := range cases {
		if err := e.B.MatMul(c.dst, c.a, c.b, c.p); err == nil {
			e.T.Errorf("MatMul with %s: no error", c.name)
		}
	}
}
