package tensor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flockml/flock/backend/cpu"
)

// ewRand returns a tensor of shape with values uniform in [lo, hi), rounded
// to dt, and those values.
func ewRand(r *rand.Rand, dt DType, shape Shape, lo, hi float64) (*Tensor, []float64) {
	vals := make([]float64, shape.NumElements())
	for i := range vals {
		vals[i] = lo + (hi-lo)*r.Float64()
		switch dt {
		case Float32:
			vals[i] = float64(float32(vals[i]))
		case Int32, Int64:
			vals[i] = math.Floor(vals[i])
		}
	}
	return FromSlice(vals, shape, Of(dt)), vals
}

// ewClose fails unless got and want agree within rtol·|want| + atol (NaN
// matching NaN).
func ewClose(t *testing.T, what string, got, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g == w || (math.IsNaN(g) && math.IsNaN(w)) || math.Abs(g-w) <= atol+rtol*math.Abs(w) {
			continue
		}
		t.Fatalf("%s: element %d = %v, want %v", what, i, g, w)
	}
}

// ewPanics fails unless fn panics with a message containing every word.
func ewPanics(t *testing.T, what string, fn func(), words ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("%s: no panic", what)
		}
		msg, _ := r.(string)
		for _, w := range words {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: panic %q does not mention %q", what, msg, w)
			}
		}
	}()
	fn()
}

// ewShape checks a tensor's dtype and shape.
func ewShape(t *testing.T, what string, x *Tensor, dt DType, shape Shape) {
	t.Helper()
	if x.DType() != dt || !x.Shape().Equal(shape) {
		t.Fatalf("%s: %v%v, want %v%v", what, x.DType(), x.Shape(), dt, shape)
	}
}

// ewBroadcast expands row-major vals of shape from to shape to (aligned on
// the right).
func ewBroadcast(vals []float64, from, to Shape) []float64 {
	out := make([]float64, to.NumElements())
	lead := len(to) - len(from)
	idx := make([]int, len(to))
	for i := range out {
		off := 0
		for a := range from {
			j := idx[a+lead]
			if from[a] == 1 {
				j = 0
			}
			off = off*from[a] + j
		}
		out[i] = vals[off]
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < to[a] {
				break
			}
			idx[a] = 0
		}
	}
	return out
}

func TestUnaryMethods(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 1))
	cases := []struct {
		name   string
		fn     func(*Tensor) *Tensor
		lo, hi float64
		ref    func(float64) float64
	}{
		{"Neg", (*Tensor).Neg, -3, 3, func(x float64) float64 { return -x }},
		{"Exp", (*Tensor).Exp, -3, 3, math.Exp},
		{"Log", (*Tensor).Log, 0.1, 3, math.Log},
		{"Sqrt", (*Tensor).Sqrt, 0, 3, math.Sqrt},
		{"Rsqrt", (*Tensor).Rsqrt, 0.1, 3, func(x float64) float64 { return 1 / math.Sqrt(x) }},
		{"Tanh", (*Tensor).Tanh, -3, 3, math.Tanh},
		{"Sigmoid", (*Tensor).Sigmoid, -5, 5, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
		{"ReLU", (*Tensor).ReLU, -3, 3, func(x float64) float64 { return math.Max(x, 0) }},
		{"GELU", (*Tensor).GELU, -3, 3, func(x float64) float64 { return x * (1 + math.Erf(x/math.Sqrt2)) / 2 }},
		{"GELUTanh", (*Tensor).GELUTanh, -3, 3, func(x float64) float64 {
			return x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) / 2
		}},
		{"Abs", (*Tensor).Abs, -3, 3, math.Abs},
		{"Sign", (*Tensor).Sign, -3, 3, func(x float64) float64 { return b2f(x > 0) - b2f(x < 0) }},
		{"Erf", (*Tensor).Erf, -3, 3, math.Erf},
		{"Reciprocal", (*Tensor).Reciprocal, 0.5, 3, func(x float64) float64 { return 1 / x }},
		{"Square", (*Tensor).Square, -3, 3, func(x float64) float64 { return x * x }},
		{"PowScalar", func(x *Tensor) *Tensor { return x.PowScalar(1.5) }, 0, 3, func(x float64) float64 { return math.Pow(x, 1.5) }},
		{"AddScalar", func(x *Tensor) *Tensor { return x.AddScalar(-0.5) }, -3, 3, func(x float64) float64 { return x - 0.5 }},
		{"MulScalar", func(x *Tensor) *Tensor { return x.MulScalar(3) }, -3, 3, func(x float64) float64 { return 3 * x }},
	}
	for _, dt := range []DType{Float32, Float64} {
		tol := 1e-6
		if dt == Float64 {
			tol = 1e-14
		}
		for _, c := range cases {
			x, vals := ewRand(r, dt, Shape{3, 5}, c.lo, c.hi)
			// A transposed view exercises strided input.
			xt := x.T()
			y := c.fn(xt)
			ewShape(t, c.name, y, dt, Shape{5, 3})
			want := make([]float64, 15)
			for i := range 5 {
				for j := range 3 {
					want[i*3+j] = c.ref(vals[j*5+i])
				}
			}
			ewClose(t, c.name+" "+dt.String(), y.Float64s(), want, tol, tol*1e-2)
			if !y.IsContiguous() || y.SharesStorage(x) {
				t.Errorf("%s: result is not a fresh contiguous tensor", c.name)
			}
			x.Release()
			xt.Release()
			y.Release()
		}
	}
	// Integer Neg, Abs, Sign, Square and ReLU.
	xi := FromSlice([]int64{-3, 0, 2, -1}, nil)
	defer xi.Release()
	for _, c := range []struct {
		fn   func(*Tensor) *Tensor
		want []int64
	}{
		{(*Tensor).Neg, []int64{3, 0, -2, 1}},
		{(*Tensor).Abs, []int64{3, 0, 2, 1}},
		{(*Tensor).Sign, []int64{-1, 0, 1, -1}},
		{(*Tensor).Square, []int64{9, 0, 4, 1}},
		{(*Tensor).ReLU, []int64{0, 0, 2, 0}},
	} {
		y := c.fn(xi)
		if y.DType() != Int64 || !equalInts(y.Int64s(), c.want) {
			t.Errorf("int64 unary: got %v %v, want %v", y.DType(), y.Int64s(), c.want)
		}
		y.Release()
	}
	ewPanics(t, "Exp of int64", func() { xi.Exp() }, "Exp", "float32 or float64")
	b := FromSlice([]bool{true}, nil)
	defer b.Release()
	ewPanics(t, "Neg of bool", func() { b.Neg() }, "Neg", "bool")
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBinaryBroadcast(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(2, 2))
	ops := []struct {
		name string
		fn   func(a, b *Tensor) *Tensor
		ref  func(a, b float64) float64
		cmp  bool
	}{
		{"Add", (*Tensor).Add, func(a, b float64) float64 { return a + b }, false},
		{"Sub", (*Tensor).Sub, func(a, b float64) float64 { return a - b }, false},
		{"Mul", (*Tensor).Mul, func(a, b float64) float64 { return a * b }, false},
		{"Div", (*Tensor).Div, func(a, b float64) float64 { return a / b }, false},
		{"Maximum", (*Tensor).Maximum, math.Max, false},
		{"Minimum", (*Tensor).Minimum, math.Min, false},
		{"Pow", (*Tensor).Pow, math.Pow, false},
		{"Eq", (*Tensor).Eq, func(a, b float64) float64 { return b2f(a == b) }, true},
		{"Ne", (*Tensor).Ne, func(a, b float64) float64 { return b2f(a != b) }, true},
		{"Lt", (*Tensor).Lt, func(a, b float64) float64 { return b2f(a < b) }, true},
		{"Le", (*Tensor).Le, func(a, b float64) float64 { return b2f(a <= b) }, true},
		{"Gt", (*Tensor).Gt, func(a, b float64) float64 { return b2f(a > b) }, true},
		{"Ge", (*Tensor).Ge, func(a, b float64) float64 { return b2f(a >= b) }, true},
	}
	shapes := []struct{ a, b, out Shape }{
		{Shape{2, 3}, Shape{2, 3}, Shape{2, 3}},
		{Shape{2, 3, 1}, Shape{4}, Shape{2, 3, 4}},
		{Shape{1, 3}, Shape{5, 1}, Shape{5, 3}},
		{Shape{}, Shape{2, 2}, Shape{2, 2}},
		{Shape{3, 1, 2}, Shape{}, Shape{3, 1, 2}},
		{Shape{0, 3}, Shape{1, 3}, Shape{0, 3}},
	}
	for _, dt := range []DType{Float64, Float32, Int64, Int32} {
		for _, op := range ops {
			if dt.IsInt() && (op.name == "Div" || op.name == "Pow") {
				continue
			}
			for _, s := range shapes {
				lo := -3.0
				if op.name == "Pow" {
					lo = 0.5
				}
				a, av := ewRand(r, dt, s.a, lo, 3)
				b, bv := ewRand(r, dt, s.b, lo, 3)
				y := op.fn(a, b)
				wantDT := dt
				if op.cmp {
					wantDT = Bool
				}
				ewShape(t, op.name, y, wantDT, s.out)
				ab, bb := ewBroadcast(av, s.a, s.out), ewBroadcast(bv, s.b, s.out)
				want := make([]float64, len(ab))
				for i := range want {
					want[i] = op.ref(ab[i], bb[i])
					if dt == Float32 {
						want[i] = float64(float32(want[i]))
					}
				}
				ewClose(t, op.name+" "+dt.String()+" "+s.a.String()+" "+s.b.String(), y.Float64s(), want, 1e-6, 0)
				a.Release()
				b.Release()
				y.Release()
			}
		}
	}
	f32 := Zeros(Shape{2})
	f64 := Zeros(Shape{2}, Of(Float64))
	i64 := Zeros(Shape{2}, Of(Int64))
	other := Zeros(Shape{2}, On(cpu.New()))
	big := Zeros(Shape{3})
	defer func() {
		for _, x := range []*Tensor{f32, f64, i64, other, big} {
			x.Release()
		}
	}()
	ewPanics(t, "dtype mismatch", func() { f32.Add(f64) }, "Add", "float32[2]", "float64[2]", "Cast")
	ewPanics(t, "device mismatch", func() { f32.Mul(other) }, "Mul", "different devices")
	ewPanics(t, "shape mismatch", func() { f32.Sub(big) }, "Sub", "[2]", "[3]", "broadcast")
	ewPanics(t, "int Div", func() { i64.Div(i64) }, "Div", "int64")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestWhere(t *testing.T) {
	t.Parallel()
	cond := FromSlice([]bool{true, false, true}, Shape{3, 1})
	a := FromSlice([]float32{1, 2, 3, 4}, Shape{1, 4})
	b := Scalar(-1)
	defer func() { cond.Release(); a.Release(); b.Release() }()
	y := Where(cond, a, b)
	defer y.Release()
	ewShape(t, "Where", y, Float32, Shape{3, 4})
	want := []float64{1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4}
	ewClose(t, "Where", y.Float64s(), want, 0, 0)
	ewPanics(t, "Where with float condition", func() { Where(a, a, b) }, "Where", "bool")
	i := Zeros(Shape{1}, Of(Int64))
	defer i.Release()
	ewPanics(t, "Where with mixed dtypes", func() { Where(cond, a, i) }, "Where", "int64")
}

func TestInPlace(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 3))
	ops := []struct {
		name string
		fn   func(x, b *Tensor)
		ref  func(x, b float64) float64
	}{
		{"AddInPlace", (*Tensor).AddInPlace, func(x, b float64) float64 { return x + b }},
		{"SubInPlace", (*Tensor).SubInPlace, func(x, b float64) float64 { return x - b }},
		{"MulInPlace", (*Tensor).MulInPlace, func(x, b float64) float64 { return x * b }},
		{"DivInPlace", (*Tensor).DivInPlace, func(x, b float64) float64 { return x / b }},
		{"AddScaledInPlace(0.5)", func(x, b *Tensor) { x.AddScaledInPlace(0.5, b) }, func(x, b float64) float64 { return x + 0.5*b }},
		{"AddScaledInPlace(1)", func(x, b *Tensor) { x.AddScaledInPlace(1, b) }, func(x, b float64) float64 { return x + b }},
		{"AddScaledInPlace(-1)", func(x, b *Tensor) { x.AddScaledInPlace(-1, b) }, func(x, b float64) float64 { return x - b }},
	}
	for _, op := range ops {
		for _, bs := range []Shape{{4, 3}, {3}, {4, 1}, {}} {
			x, xv := ewRand(r, Float64, Shape{4, 3}, 1, 2)
			b, bv := ewRand(r, Float64, bs, 1, 2)
			op.fn(x, b)
			bb := ewBroadcast(bv, bs, Shape{4, 3})
			want := make([]float64, len(xv))
			for i := range want {
				want[i] = op.ref(xv[i], bb[i])
			}
			ewClose(t, op.name+" "+bs.String(), x.Float64s(), want, 1e-15, 0)
			x.Release()
			b.Release()
		}
	}
	// Through a strided view: the base tensor changes where the view looks.
	base := FromSlice([]float64{1, 2, 3, 4, 5, 6}, Shape{2, 3})
	col := base.Slice(1, 1, 3).T() // [[2, 5], [3, 6]]
	two := Scalar(2, Of(Float64))
	col.MulInPlace(two)
	ewClose(t, "MulInPlace through a view", base.Float64s(), []float64{1, 4, 6, 4, 10, 12}, 0, 0)
	col.AddScalarInPlace(1)
	col.MulScalarInPlace(-1)
	ewClose(t, "scalar ops through a view", base.Float64s(), []float64{1, -5, -7, 4, -11, -13}, 0, 0)
	// Partly overlapping operands read the values from before the update.
	v := FromSlice([]float64{1, 2, 3, 4, 5}, nil)
	head, tail := v.Slice(0, 0, 4), v.Slice(0, 1, 5)
	tail.AddInPlace(head)
	ewClose(t, "overlapping AddInPlace", v.Float64s(), []float64{1, 3, 5, 7, 9}, 0, 0)
	v.AddInPlace(v)
	ewClose(t, "x += x", v.Float64s(), []float64{2, 6, 10, 14, 18}, 0, 0)
	ewPanics(t, "operand larger than the target", func() { two.AddInPlace(base) }, "AddInPlace", "[2 3]")
	wide := two.Expand(3)
	ewPanics(t, "write to a broadcast tensor", func() { wide.AddScalarInPlace(1) }, "AddScalarInPlace", "broadcast")
	for _, x := range []*Tensor{base, col, two, v, head, tail, wide} {
		x.Release()
	}
}
