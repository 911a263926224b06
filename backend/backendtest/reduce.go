package backendtest

import (
	"fmt"
	"math"
	"runtime"

	"github.com/flockml/flock/backend"
)

func init() { register("Reduce", checkReduce) }

// groups splits the row-major values of shape into the groups that a
// reduction over axes combines: one group per output, in the output's
// row-major order, each group's values in row-major order of the reduced
// axes.
func groups(vals []float64, shape backend.Shape, axes []int) (out backend.Shape, g [][]float64) {
	red := make([]bool, len(shape))
	for _, a := range axes {
		red[a] = true
	}
	out = backend.Shape{}
	for i, d := range shape {
		if !red[i] {
			out = append(out, d)
		}
	}
	g = make([][]float64, out.NumElements())
	idx := make([]int, len(shape))
	for _, v := range vals {
		o := 0
		for i, d := range shape {
			if !red[i] {
				o = o*d + idx[i]
			}
		}
		g[o] = append(g[o], v)
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	return out, g
}

// exactSum returns Σ xs with one rounding, by carrying the exact total in
// non-overlapping float64 pieces (Shewchuk's algorithm, as in Python's
// math.fsum).
func exactSum(xs []float64) float64 {
	var parts []float64
	special := 0.0
	for _, x := range xs {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			special += x
			continue
		}
		i := 0
		for _, y := range parts {
			if math.Abs(x) < math.Abs(y) {
				x, y = y, x
			}
			hi := x + y
			lo := y - (hi - x)
			if lo != 0 {
				parts[i] = lo
				i++
			}
			x = hi
		}
		parts = append(parts[:i], x)
	}
	if special != 0 || math.IsNaN(special) {
		return special
	}
	s := 0.0
	for i := len(parts) - 1; i >= 0; i-- {
		s += parts[i]
	}
	return s
}

// refReduce is the float64 reference of op over one group.
func refReduce(op backend.ReduceOp, g []float64, correction int) float64 {
	n := float64(len(g))
	switch op {
	case backend.Sum:
		return exactSum(g)
	case backend.Mean:
		return exactSum(g) / n
	case backend.Var:
		m := exactSum(g) / n
		sq := make([]float64, len(g))
		for i, x := range g {
			sq[i] = (x - m) * (x - m)
		}
		return exactSum(sq) / math.Max(n-float64(correction), 0)
	}
	best := 0
	for i, x := range g {
		b := g[best]
		switch {
		case math.IsNaN(b):
		case math.IsNaN(x):
			best = i
		case (op == backend.Max || op == backend.ArgMax) && x > b:
			best = i
		case (op == backend.Min || op == backend.ArgMin) && x < b:
			best = i
		}
	}
	if op == backend.ArgMax || op == backend.ArgMin {
		return float64(best)
	}
	return g[best]
}

var reduceOps = []struct {
	op         backend.ReduceOp
	name       string
	correction int
}{
	{backend.Sum, "Sum", 0},
	{backend.Mean, "Mean", 0},
	{backend.Max, "Max", 0},
	{backend.Min, "Min", 0},
	{backend.ArgMax, "ArgMax", 0},
	{backend.ArgMin, "ArgMin", 0},
	{backend.Var, "Var", 0},
	{backend.Var, "Var(1)", 1},
}

// subsets returns every sorted subset of the axes of a rank-r shape.
func subsets(r int) [][]int {
	var out [][]int
	for m := 0; m < 1<<r; m++ {
		s := []int{}
		for a := 0; a < r; a++ {
			if m&(1<<a) != 0 {
				s = append(s, a)
			}
		}
		out = append(out, s)
	}
	return out
}

// reduceOnce runs op and returns the result, or an error.
func (e *Env) reduceOnce(op backend.ReduceOp, x backend.View, axes []int, correction int) ([]float64, error) {
	outShape, _ := groups(make([]float64, x.NumElements()), x.Shape, axes)
	dt := x.DType
	if op == backend.ArgMax || op == backend.ArgMin {
		dt = backend.Int64
	}
	dst := e.Alloc(dt, outShape)
	if err := e.B.Reduce(op, dst, x, axes, backend.ReduceParams{Correction: correction}); err != nil {
		return nil, err
	}
	return e.Get(dst), nil
}

func checkReduce(e *Env) {
	for _, dt := range FloatTypes {
		for _, s := range Shapes {
			if skipLarge(s, dt) {
				continue
			}
			for _, strided := range []bool{false, true} {
				x, vals := e.Random(dt, s, strided, -1, 1)
				for _, axes := range subsets(len(s)) {
					_, g := groups(vals, s, axes)
					for _, c := range reduceOps {
						what := fmt.Sprintf("Reduce %s %v%v over %v strided=%v", c.name, dt, s, axes, strided)
						arg := c.op == backend.ArgMax || c.op == backend.ArgMin
						empty := len(g) > 0 && len(g[0]) == 0
						if arg && len(axes) != 1 {
							continue
						}
						got, err := e.reduceOnce(c.op, x, axes, c.correction)
						if empty && c.op != backend.Sum && c.op != backend.Mean && c.op != backend.Var {
							if err == nil {
								e.T.Errorf("%s: no error for an empty reduction", what)
							}
							continue
						}
						if err != nil {
							e.T.Fatalf("%s: %v", what, err)
						}
						want := make([]float64, len(g))
						for i, grp := range g {
							want[i] = refReduce(c.op, grp, c.correction)
							if !arg {
								want[i] = Round(dt, want[i])
							}
						}
						rtol, atol := Tol(dt)*4, Tol(dt)*1e-2
						if arg {
							rtol, atol = 0, 0
						}
						e.Close(what, got, want, rtol, atol)
					}
				}
			}
		}
	}
	// Broadcast inputs (zero strides).
	for _, bc := range broadcastCases {
		if skipLarge(bc.full, backend.Float64) {
			continue
		}
		x, vals := e.Random(backend.Float64, bc.small, true, -1, 1)
		full := broadcastVals(vals, bc.small, bc.full)
		for _, axes := range subsets(len(bc.full)) {
			_, g := groups(full, bc.full, axes)
			for _, c := range reduceOps[:4] {
				got, err := e.reduceOnce(c.op, broadcast(x, bc.full), axes, 0)
				if err != nil {
					e.T.Fatalf("Reduce %s broadcast: %v", c.name, err)
				}
				want := make([]float64, len(g))
				for i, grp := range g {
					want[i] = refReduce(c.op, grp, 0)
				}
				e.Close(fmt.Sprintf("Reduce %s of %v broadcast to %v over %v", c.name, bc.small, bc.full, axes), got, want, Tol(backend.Float64)*4, 1e-14)
			}
		}
	}
	checkReduceSpecial(e)
}

func checkReduceSpecial(e *Env) {
	for _, dt := range FloatTypes {
		// Ties: the first position wins.
		shape := backend.Shape{6, 40}
		vals := make([]float64, shape.NumElements())
		for i := range vals {
			vals[i] = float64(e.Rand.IntN(3) - 1)
		}
		for _, strided := range []bool{false, true} {
			x := e.Alloc(dt, shape)
			if strided {
				x = e.Strided(dt, shape)
			}
			e.Set(x, vals)
			for _, axis := range []int{0, 1} {
				_, g := groups(vals, shape, []int{axis})
				for _, op := range []backend.ReduceOp{backend.ArgMax, backend.ArgMin} {
					got, err := e.reduceOnce(op, x, []int{axis}, 0)
					if err != nil {
						e.T.Fatalf("Reduce ties: %v", err)
					}
					want := make([]float64, len(g))
					for i, grp := range g {
						want[i] = refReduce(op, grp, 0)
					}
					e.Close(fmt.Sprintf("Reduce %d ties %v axis %d strided=%v", op, dt, axis, strided), got, want, 0, 0)
				}
			}
		}
		// NaN propagates through Max, Min and their arguments and through
		// sums; infinities sum to infinities.
		nan, inf := math.NaN(), math.Inf(1)
		rows := [][]float64{
			{1, nan, 3, nan},
			{-inf, 2, -1, 0},
			{inf, 1, 2, inf},
			{inf, -inf, 0, 0},
			{5, 5, 1, 5},
		}
		var flat []float64
		for _, r := range rows {
			flat = append(flat, r...)
		}
		x := e.Alloc(dt, backend.Shape{len(rows), 4})
		e.Set(x, flat)
		for _, c := range reduceOps {
			got, err := e.reduceOnce(c.op, x, []int{1}, c.correction)
			if err != nil {
				e.T.Fatalf("Reduce special: %v", err)
			}
			want := make([]float64, len(rows))
			for i, r := range rows {
				want[i] = refReduce(c.op, r, c.correction)
			}
			e.Close(fmt.Sprintf("Reduce %s %v of NaN/Inf rows", c.name, dt), got, want, Tol(dt), 0)
		}
		// A long sum stays accurate: 2²⁰ terms of 0.1 (float32 accumulation
		// would be off by percents).
		n := 1 << 20
		x = e.Alloc(dt, backend.Shape{n})
		ones := make([]float64, n)
		for i := range ones {
			ones[i] = Round(dt, 0.1)
		}
		e.Set(x, ones)
		got, err := e.reduceOnce(backend.Sum, x, []int{0}, 0)
		if err != nil {
			e.T.Fatalf("Reduce long sum: %v", err)
		}
		e.Close(fmt.Sprintf("Reduce Sum of 2^20 × 0.1 %v", dt), got, []float64{Round(dt, float64(n)*Round(dt, 0.1))}, Tol(dt), 0)
		// Results do not depend on the number of threads.
		big := backend.Shape{3, 70000}
		x, _ = e.Random(dt, big, false, -1, 1)
		for _, axes := range [][]int{{0, 1}, {1}, {0}} {
			for _, op := range []backend.ReduceOp{backend.Sum, backend.Var, backend.ArgMax} {
				if op == backend.ArgMax && len(axes) != 1 {
					continue
				}
				prev := runtime.GOMAXPROCS(1)
				one, err1 := e.reduceOnce(op, x, axes, 0)
				runtime.GOMAXPROCS(max(prev, 4))
				many, err2 := e.reduceOnce(op, x, axes, 0)
				runtime.GOMAXPROCS(prev)
				if err1 != nil || err2 != nil {
					e.T.Fatalf("Reduce threads: %v %v", err1, err2)
				}
				e.Close(fmt.Sprintf("Reduce %d %v over %v, 1 thread vs many", op, dt, axes), many, one, 0, 0)
			}
		}
	}
	// Argument errors.
	x := e.Alloc(backend.Float32, backend.Shape{2, 3})
	bad := []struct {
		name string
		op   backend.ReduceOp
		dst  backend.View
		axes []int
	}{
		{"unsorted axes", backend.Sum, e.Alloc(backend.Float32, backend.Shape{}), []int{1, 0}},
		{"axis out of range", backend.Sum, e.Alloc(backend.Float32, backend.Shape{2}), []int{2}},
		{"wrong dst shape", backend.Sum, e.Alloc(backend.Float32, backend.Shape{3}), []int{1}},
		{"argmax over two axes", backend.ArgMax, e.Alloc(backend.Int64, backend.Shape{}), []int{0, 1}},
		{"argmax into float", backend.ArgMax, e.Alloc(backend.Float32, backend.Shape{2}), []int{1}},
	}
	for _, c := range bad {
		if err := e.B.Reduce(c.op, c.dst, x, c.axes, backend.ReduceParams{}); err == nil {
			e.T.Errorf("Reduce with %s: no error", c.name)
		}
	}
}
