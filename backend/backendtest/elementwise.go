package backendtest

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

func init() {
	register("Copy", checkCopy)
	register("Fill", checkFill)
	register("Unary", checkUnary)
	register("Binary", checkBinary)
	register("Where", checkWhere)
}

// allTypes are the dtypes Copy, Fill and Where handle.
var allTypes = []backend.DType{
	backend.Float32, backend.Float64, backend.Float16, backend.BFloat16,
	backend.Int32, backend.Int64, backend.Uint8, backend.Bool,
}

// broadcast returns v (whose extents are those of shape or 1) expanded to
// shape with zero strides.
func broadcast(v backend.View, shape backend.Shape) backend.View {
	st := make([]int, len(shape))
	for i := range shape {
		if v.Shape[i] == shape[i] {
			st[i] = v.Strides[i]
		}
	}
	v.Shape, v.Strides = shape.Clone(), st
	return v
}

// broadcastVals expands row-major vals of shape small to shape.
func broadcastVals(vals []float64, small, shape backend.Shape) []float64 {
	out := make([]float64, shape.NumElements())
	idx := make([]int, len(shape))
	for i := range out {
		off, acc := 0, 1
		for a := len(shape) - 1; a >= 0; a-- {
			if small[a] != 1 {
				off += idx[a] * acc
			}
			acc *= small[a]
		}
		out[i] = vals[off]
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	return out
}

// broadcastCases are pairs (small, full) with small broadcasting to full.
var broadcastCases = []struct{ small, full backend.Shape }{
	{backend.Shape{1}, backend.Shape{7}},
	{backend.Shape{1, 3}, backend.Shape{2, 3}},
	{backend.Shape{2, 1}, backend.Shape{2, 3}},
	{backend.Shape{1, 1, 7}, backend.Shape{5, 1, 7}},
	{backend.Shape{4, 1, 2, 1}, backend.Shape{4, 3, 2, 5}},
	{backend.Shape{1, 3, 1, 1}, backend.Shape{4, 3, 2, 5}},
	{backend.Shape{1, 65}, backend.Shape{33, 65}},
	{backend.Shape{3, 1, 129}, backend.Shape{3, 257, 129}},
	{backend.Shape{2, 3, 1, 1}, backend.Shape{2, 3, 5, 7}}, // a per-channel value over long runs
}

// refBF16 rounds x to bfloat16 (8 significant bits, float32's exponent
// range) with ties to even, by arithmetic on float64.
func refBF16(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x
	}
	ax := math.Abs(x)
	e := max(math.Ilogb(ax), -126) // below 2⁻¹²⁶ the quantum stays 2⁻¹³³
	q := math.Ldexp(1, e-7)
	r := math.RoundToEven(ax/q) * q
	if r >= math.Ldexp(2, 127) {
		r = math.Inf(1)
	}
	return math.Copysign(r, x)
}

// refConvert is the value of x (a value of dtype from) converted to to.
func refConvert(x float64, from, to backend.DType) float64 {
	switch to {
	case backend.Float64:
		return x
	case backend.Float32:
		return float64(float32(x))
	case backend.Float16:
		return float64(f16ToF32(f32ToF16(float32(x))))
	case backend.BFloat16:
		return refBF16(float64(float32(x)))
	case backend.Bool:
		if x != 0 {
			return 1
		}
		return 0
	}
	return math.Trunc(x)
}

// fits reports whether x converts to an integer dtype without leaving its
// range.
func fits(x float64, dt backend.DType) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return false
	}
	t := math.Trunc(x)
	switch dt {
	case backend.Int32:
		return t >= math.MinInt32 && t <= math.MaxInt32
	case backend.Int64:
		return t >= -(1<<62) && t <= 1<<62
	case backend.Uint8:
		return t >= 0 && t <= 255
	}
	return true
}

// castValues are inputs for Copy between dtypes: rounding ties of each
// float format, subnormals, overflow, infinities and NaN.
var castValues = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 2.5, -2.5, 3.75, -3.75, 7, 100, 127, 128, 200, 255, 256, -129,
	65504, 65519, 65520, 70000, -70000, 1e5, 1 << 31, -(1 << 31), 1<<40 + 1, 1e10, -1e10,
	math.Ldexp(1, -24), math.Ldexp(1, -25), math.Ldexp(3, -26), math.Ldexp(3, -25), math.Ldexp(1, -14), math.Ldexp(1023, -24),
	1 + math.Ldexp(1, -11), 1 + math.Ldexp(3, -11), 1 + math.Ldexp(1, -8), 1 + math.Ldexp(3, -8), 1 + math.Ldexp(1, -9),
	math.Ldexp(1, -130), math.Ldexp(3, -140), math.Ldexp(1, -149), math.MaxFloat32, 3.3e38, 1e-8, 0.1, -0.3, 1e300, -1e300,
	math.Inf(1), math.Inf(-1), math.NaN(),
}

// castInputs returns the values of castValues that dtype from represents
// and that convert meaningfully to to (integers stay in range).
func castInputs(from, to backend.DType) []float64 {
	var out []float64
	for _, x := range castValues {
		switch {
		case from == backend.Bool:
			if x != 0 && x != 1 {
				continue
			}
		case !from.IsFloat():
			if x != math.Trunc(x) || !fits(x, from) {
				continue
			}
		default:
			x = Round(from, x)
		}
		if to.IsInt() && !fits(x, to) {
			continue
		}
		out = append(out, x)
	}
	return out
}

func checkCopy(e *Env) {
	for _, from := range allTypes {
		for _, to := range allTypes {
			vals := castInputs(from, to)
			n := len(vals)
			want := make([]float64, n)
			for i, x := range vals {
				want[i] = refConvert(x, from, to)
			}
			what := fmt.Sprintf("Copy %v→%v", from, to)
			// As a [n] vector, contiguous to contiguous.
			src := e.Alloc(from, backend.Shape{n})
			e.Set(src, vals)
			dst := e.Alloc(to, backend.Shape{n})
			if err := e.B.Copy(dst, src); err != nil {
				e.T.Fatalf("%s: %v", what, err)
			}
			e.Close(what, e.Get(dst), want, 0, 0)
			// As [n, 1] and transposed [1, n] strided views with gaps.
			src = e.Strided(from, backend.Shape{n, 1})
			e.Set(src, vals)
			dst = e.Strided(to, backend.Shape{n, 1})
			if err := e.B.Copy(dst, src); err != nil {
				e.T.Fatalf("%s strided: %v", what, err)
			}
			e.Close(what+" strided", e.Get(dst), want, 0, 0)
		}
	}
	// Layouts, with random values of each dtype.
	for _, dt := range []backend.DType{backend.Float32, backend.Float64, backend.Int64, backend.Float16, backend.Bool} {
		for _, to := range []backend.DType{dt, backend.Float32, backend.Float64} {
			for _, s := range Shapes {
				if skipLarge(s, dt) {
					continue
				}
				for _, strided := range []bool{false, true} {
					src, vals := e.Random(dt, s, strided, -100, 100)
					dst := e.Strided(to, s)
					if !strided {
						dst = e.Alloc(to, s)
					}
					if err := e.B.Copy(dst, src); err != nil {
						e.T.Fatalf("Copy %v%v→%v: %v", dt, s, to, err)
					}
					want := make([]float64, len(vals))
					for i, x := range vals {
						want[i] = refConvert(x, dt, to)
					}
					e.Close(fmt.Sprintf("Copy %v→%v %v strided=%v", dt, to, s, strided), e.Get(dst), want, 0, 0)
				}
			}
		}
	}
	// Broadcast sources.
	for _, c := range broadcastCases {
		src, vals := e.Random(backend.Float32, c.small, true, -1, 1)
		dst := e.Alloc(backend.Float64, c.full)
		if err := e.B.Copy(dst, broadcast(src, c.full)); err != nil {
			e.T.Fatalf("Copy broadcast %v→%v: %v", c.small, c.full, err)
		}
		e.Close(fmt.Sprintf("Copy broadcast %v→%v", c.small, c.full), e.Get(dst), broadcastVals(vals, c.small, c.full), 0, 0)
	}
	// Mismatched shapes are an error.
	if err := e.B.Copy(e.Alloc(backend.Float32, backend.Shape{2, 3}), e.Alloc(backend.Float32, backend.Shape{3, 2})); err == nil {
		e.T.Errorf("Copy [3 2] into [2 3]: no error")
	}
}

func checkFill(e *Env) {
	for _, dt := range allTypes {
		for _, v := range []float64{0, 1, -2.75, 3.5, 1 + math.Ldexp(1, -11), 70000, math.NaN()} {
			if !dt.IsFloat() && !fits(v, dt) {
				continue
			}
			for _, s := range []backend.Shape{{}, {0}, {7}, {4, 3, 2, 5}, {33, 65}} {
				for _, strided := range []bool{false, true} {
					dst := e.Alloc(dt, s)
					if strided {
						dst = e.Strided(dt, s)
					}
					if err := e.B.Fill(dst, v); err != nil {
						e.T.Fatalf("Fill %v%v: %v", dt, s, err)
					}
					want := make([]float64, s.NumElements())
					for i := range want {
						want[i] = refConvert(v, backend.Float64, dt)
					}
					e.Close(fmt.Sprintf("Fill %v%v with %v strided=%v", dt, s, v, strided), e.Get(dst), want, 0, 0)
				}
			}
		}
	}
}

// unaryCase is a unary op with its parameter, input range and float64
// reference.
type unaryCase struct {
	op     backend.UnaryOp
	name   string
	arg    float64
	lo, hi float64
	ref    func(x float64) float64
}

var unaryCases = []unaryCase{
	{backend.Neg, "Neg", 0, -3, 3, func(x float64) float64 { return -x }},
	{backend.Exp, "Exp", 0, -10, 10, math.Exp},
	{backend.Log, "Log", 0, 0.01, 50, math.Log},
	{backend.Sqrt, "Sqrt", 0, 0, 50, math.Sqrt},
	{backend.Rsqrt, "Rsqrt", 0, 0.01, 50, func(x float64) float64 { return 1 / math.Sqrt(x) }},
	{backend.Tanh, "Tanh", 0, -5, 5, math.Tanh},
	{backend.Sigmoid, "Sigmoid", 0, -20, 20, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
	{backend.ReLU, "ReLU", 0, -3, 3, func(x float64) float64 { return math.Max(x, 0) }},
	{backend.GELU, "GELU", 0, -6, 6, func(x float64) float64 { return x / 2 * (1 + math.Erf(x/math.Sqrt2)) }},
	{backend.GELUTanh, "GELUTanh", 0, -6, 6, func(x float64) float64 {
		return x / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}},
	{backend.Abs, "Abs", 0, -3, 3, math.Abs},
	{backend.Sign, "Sign", 0, -3, 3, func(x float64) float64 {
		switch {
		case x > 0:
			return 1
		case x < 0:
			return -1
		}
		return 0
	}},
	{backend.Erf, "Erf", 0, -3, 3, math.Erf},
	{backend.Reciprocal, "Reciprocal", 0, 0.1, 10, func(x float64) float64 { return 1 / x }},
	{backend.Square, "Square", 0, -10, 10, func(x float64) float64 { return x * x }},
	{backend.PowScalar, "Pow2", 2, -5, 5, func(x float64) float64 { return x * x }},
	{backend.PowScalar, "Pow2.5", 2.5, 0, 5, func(x float64) float64 { return math.Pow(x, 2.5) }},
	{backend.PowScalar, "Pow-1.5", -1.5, 0.1, 5, func(x float64) float64 { return math.Pow(x, -1.5) }},
	{backend.PowScalar, "Pow3", 3, -3, 3, func(x float64) float64 { return x * x * x }},
	{backend.AddScalar, "AddScalar", 0.75, -3, 3, func(x float64) float64 { return x + 0.75 }},
	{backend.MulScalar, "MulScalar", -1.25, -3, 3, func(x float64) float64 { return x * -1.25 }},
}

func checkUnary(e *Env) {
	for _, dt := range FloatTypes {
		for _, c := range unaryCases {
			ref := func(vals []float64) []float64 {
				want := make([]float64, len(vals))
				for i, x := range vals {
					want[i] = Round(dt, c.ref(x))
				}
				return want
			}
			for _, s := range Shapes {
				if skipLarge(s, dt) {
					continue
				}
				for _, strided := range []bool{false, true} {
					x, vals := e.Random(dt, s, strided, c.lo, c.hi)
					dst := e.Alloc(dt, s)
					what := fmt.Sprintf("Unary %s %v%v strided=%v", c.name, dt, s, strided)
					if err := e.B.Unary(c.op, dst, x, c.arg); err != nil {
						e.T.Fatalf("%s: %v", what, err)
					}
					want := ref(vals)
					e.Close(what, e.Get(dst), want, Tol(dt)*4, Tol(dt)*1e-3)
					// In place.
					if err := e.B.Unary(c.op, x, x, c.arg); err != nil {
						e.T.Fatalf("%s in place: %v", what, err)
					}
					e.Close(what+" in place", e.Get(x), want, Tol(dt)*4, Tol(dt)*1e-3)
				}
			}
			// A broadcast input into a contiguous output.
			bc := broadcastCases[4]
			x, vals := e.Random(dt, bc.small, false, c.lo, c.hi)
			dst := e.Alloc(dt, bc.full)
			if err := e.B.Unary(c.op, dst, broadcast(x, bc.full), c.arg); err != nil {
				e.T.Fatalf("Unary %s broadcast: %v", c.name, err)
			}
			e.Close(fmt.Sprintf("Unary %s %v broadcast", c.name, dt), e.Get(dst), ref(broadcastVals(vals, bc.small, bc.full)), Tol(dt)*4, Tol(dt)*1e-3)
		}
		// Special values.
		special := []float64{math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), -1e3, 1e3}
		for _, c := range []unaryCase{unaryCases[1], unaryCases[5], unaryCases[6], unaryCases[7]} {
			x := e.Alloc(dt, backend.Shape{len(special)})
			e.Set(x, special)
			dst := e.Alloc(dt, x.Shape)
			if err := e.B.Unary(c.op, dst, x, 0); err != nil {
				e.T.Fatalf("Unary %s special: %v", c.name, err)
			}
			want := make([]float64, len(special))
			for i, v := range special {
				want[i] = Round(dt, c.ref(v))
			}
			e.Close(fmt.Sprintf("Unary %s %v of ±Inf, ±0, ±1e3", c.name, dt), e.Get(dst), want, Tol(dt), 0)
		}
	}
	if err := e.B.Unary(backend.Exp, e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float64, backend.Shape{2}), 0); err == nil {
		e.T.Errorf("Unary with mismatched dtypes: no error")
	}
	if err := e.B.Unary(backend.Exp, e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float32, backend.Shape{3}), 0); err == nil {
		e.T.Errorf("Unary with mismatched shapes: no error")
	}
}

// binaryCase is a binary op with its float64 reference; ints marks the ops
// that integer dtypes support.
type binaryCase struct {
	op   backend.BinaryOp
	name string
	ref  func(a, b float64) float64
	ints bool
}

func boolOf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var binaryCases = []binaryCase{
	{backend.Add, "Add", func(a, b float64) float64 { return a + b }, true},
	{backend.Sub, "Sub", func(a, b float64) float64 { return a - b }, true},
	{backend.Mul, "Mul", func(a, b float64) float64 { return a * b }, true},
	{backend.Div, "Div", func(a, b float64) float64 { return a / b }, false},
	{backend.Maximum, "Maximum", func(a, b float64) float64 {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.NaN()
		}
		return math.Max(a, b)
	}, true},
	{backend.Minimum, "Minimum", func(a, b float64) float64 {
		if math.IsNaN(a) || math.IsNaN(b) {
			return math.NaN()
		}
		return math.Min(a, b)
	}, true},
	{backend.Pow, "Pow", math.Pow, false},
	{backend.Eq, "Eq", func(a, b float64) float64 { return boolOf(a == b) }, true},
	{backend.Ne, "Ne", func(a, b float64) float64 { return boolOf(a != b) }, true},
	{backend.Lt, "Lt", func(a, b float64) float64 { return boolOf(a < b) }, true},
	{backend.Le, "Le", func(a, b float64) float64 { return boolOf(a <= b) }, true},
	{backend.Gt, "Gt", func(a, b float64) float64 { return boolOf(a > b) }, true},
	{backend.Ge, "Ge", func(a, b float64) float64 { return boolOf(a >= b) }, true},
}

// binaryInputs returns operand values for op: positive bases for Pow,
// non-zero divisors for Div, and small integers (so that comparisons see
// ties) otherwise.
func binaryInputs(e *Env, op backend.BinaryOp, dt backend.DType, n int) (a, b []float64) {
	a, b = make([]float64, n), make([]float64, n)
	for i := range a {
		switch {
		case op == backend.Pow:
			a[i], b[i] = 0.1+3*e.Rand.Float64(), -2+4*e.Rand.Float64()
		case op == backend.Div:
			a[i], b[i] = -5+10*e.Rand.Float64(), (0.5+2*e.Rand.Float64())*float64(1-2*e.Rand.IntN(2))
		case op.IsComparison() || !dt.IsFloat():
			a[i], b[i] = float64(e.Rand.IntN(7)-3), float64(e.Rand.IntN(7)-3)
		default:
			a[i], b[i] = -5+10*e.Rand.Float64(), -5+10*e.Rand.Float64()
		}
		a[i], b[i] = Round(dt, a[i]), Round(dt, b[i])
	}
	return a, b
}

func checkBinary(e *Env) {
	types := []backend.DType{backend.Float32, backend.Float64, backend.Int32, backend.Int64}
	for _, dt := range types {
		for _, c := range binaryCases {
			if !dt.IsFloat() && !c.ints {
				continue
			}
			outDT := dt
			if c.op.IsComparison() {
				outDT = backend.Bool
			}
			rtol := Tol(outDT) * 4
			if !dt.IsFloat() || c.op.IsComparison() {
				rtol = 0
			}
			ref := func(a, b []float64) []float64 {
				want := make([]float64, len(a))
				for i := range a {
					want[i] = Round(outDT, c.ref(a[i], b[i]))
				}
				return want
			}
			for _, s := range Shapes {
				if skipLarge(s, dt) {
					continue
				}
				for _, strided := range []bool{false, true} {
					what := fmt.Sprintf("Binary %s %v%v strided=%v", c.name, dt, s, strided)
					av, bv := binaryInputs(e, c.op, dt, s.NumElements())
					a, b := e.alloc2(dt, s, strided, av, bv)
					dst := e.Alloc(outDT, s)
					if err := e.B.Binary(c.op, dst, a, b); err != nil {
						e.T.Fatalf("%s: %v", what, err)
					}
					want := ref(av, bv)
					e.Close(what, e.Get(dst), want, rtol, 0)
					if c.op.IsComparison() {
						continue
					}
					// In place into a, then into b.
					if err := e.B.Binary(c.op, a, a, b); err != nil {
						e.T.Fatalf("%s into a: %v", what, err)
					}
					e.Close(what+" into a", e.Get(a), want, rtol, 0)
					e.Set(a, av)
					if err := e.B.Binary(c.op, b, a, b); err != nil {
						e.T.Fatalf("%s into b: %v", what, err)
					}
					e.Close(what+" into b", e.Get(b), want, rtol, 0)
				}
			}
			// Broadcasting on either side, and both.
			for _, bc := range broadcastCases {
				if skipLarge(bc.full, dt) {
					continue
				}
				full := bc.full
				n, m := full.NumElements(), bc.small.NumElements()
				av, _ := binaryInputs(e, c.op, dt, n)
				_, bv := binaryInputs(e, c.op, dt, m)
				a := e.Alloc(dt, full)
				e.Set(a, av)
				b := e.Strided(dt, bc.small)
				e.Set(b, bv)
				dst := e.Alloc(outDT, full)
				what := fmt.Sprintf("Binary %s %v %v with %v", c.name, dt, full, bc.small)
				if err := e.B.Binary(c.op, dst, a, broadcast(b, full)); err != nil {
					e.T.Fatalf("%s: %v", what, err)
				}
				bfull := broadcastVals(bv, bc.small, full)
				e.Close(what, e.Get(dst), ref(av, bfull), rtol, 0)
				if err := e.B.Binary(c.op, dst, broadcast(b, full), a); err != nil {
					e.T.Fatalf("%s swapped: %v", what, err)
				}
				e.Close(what+" swapped", e.Get(dst), ref(bfull, av), rtol, 0)
				if !c.op.IsComparison() {
					if err := e.B.Binary(c.op, a, a, broadcast(b, full)); err != nil {
						e.T.Fatalf("%s in place: %v", what, err)
					}
					e.Close(what+" in place", e.Get(a), ref(av, bfull), rtol, 0)
				}
			}
		}
	}
	// NaN and infinities.
	for _, dt := range FloatTypes {
		nan, inf := math.NaN(), math.Inf(1)
		av := []float64{nan, 1, nan, inf, -inf, 0, inf, 2}
		bv := []float64{1, nan, nan, 1, inf, math.Copysign(0, -1), inf, -inf}
		for _, c := range binaryCases {
			if c.op == backend.Pow {
				continue
			}
			outDT := dt
			if c.op.IsComparison() {
				outDT = backend.Bool
			}
			a, b := e.alloc2(dt, backend.Shape{len(av)}, false, av, bv)
			dst := e.Alloc(outDT, a.Shape)
			if err := e.B.Binary(c.op, dst, a, b); err != nil {
				e.T.Fatalf("Binary %s special: %v", c.name, err)
			}
			want := make([]float64, len(av))
			for i := range av {
				want[i] = c.ref(av[i], bv[i])
			}
			e.Close(fmt.Sprintf("Binary %s %v of NaN/Inf", c.name, dt), e.Get(dst), want, 0, 0)
		}
	}
	bad := []struct {
		name       string
		dst, a, b  backend.View
		op         backend.BinaryOp
		shouldFail bool
	}{
		{"dtype mismatch", e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float64, backend.Shape{2}), backend.Add, true},
		{"shape mismatch", e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float32, backend.Shape{3}), backend.Add, true},
		{"comparison into float", e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float32, backend.Shape{2}), e.Alloc(backend.Float32, backend.Shape{2}), backend.Lt, true},
	}
	for _, c := range bad {
		if err := e.B.Binary(c.op, c.dst, c.a, c.b); (err != nil) != c.shouldFail {
			e.T.Errorf("Binary %s: error %v", c.name, err)
		}
	}
}

// alloc2 allocates two views of shape holding av and bv.
func (e *Env) alloc2(dt backend.DType, s backend.Shape, strided bool, av, bv []float64) (a, b backend.View) {
	if strided {
		a, b = e.Strided(dt, s), e.Strided(dt, s)
	} else {
		a, b = e.Alloc(dt, s), e.Alloc(dt, s)
	}
	e.Set(a, av)
	e.Set(b, bv)
	return a, b
}

func checkWhere(e *Env) {
	for _, dt := range allTypes {
		for _, s := range Shapes {
			if skipLarge(s, dt) {
				continue
			}
			for _, strided := range []bool{false, true} {
				cond, cv := e.Random(backend.Bool, s, strided, 0, 2)
				a, av := e.Random(dt, s, strided, 0, 50)
				b, bv := e.Random(dt, s, !strided, 50, 100)
				dst := e.Alloc(dt, s)
				what := fmt.Sprintf("Where %v%v strided=%v", dt, s, strided)
				if err := e.B.Where(dst, cond, a, b); err != nil {
					e.T.Fatalf("%s: %v", what, err)
				}
				want := make([]float64, len(cv))
				for i := range cv {
					want[i] = bv[i]
					if cv[i] != 0 {
						want[i] = av[i]
					}
				}
				e.Close(what, e.Get(dst), want, 0, 0)
			}
		}
	}
	for _, dt := range FloatTypes {
		for _, bc := range broadcastCases {
			if skipLarge(bc.full, dt) {
				continue
			}
			cond, cv := e.Random(backend.Bool, bc.small, true, 0, 2)
			a, av := e.Random(dt, bc.full, false, -1, 1)
			b, bv := e.Random(dt, bc.small, false, -1, 1)
			dst := e.Alloc(dt, bc.full)
			if err := e.B.Where(dst, broadcast(cond, bc.full), a, broadcast(b, bc.full)); err != nil {
				e.T.Fatalf("Where broadcast %v: %v", bc.small, err)
			}
			cf, bf := broadcastVals(cv, bc.small, bc.full), broadcastVals(bv, bc.small, bc.full)
			want := make([]float64, len(av))
			for i := range av {
				want[i] = bf[i]
				if cf[i] != 0 {
					want[i] = av[i]
				}
			}
			e.Close(fmt.Sprintf("Where %v broadcast %v→%v", dt, bc.small, bc.full), e.Get(dst), want, 0, 0)
		}
	}
	f := e.Alloc(backend.Float32, backend.Shape{3})
	if err := e.B.Where(f, f, f, f); err == nil {
		e.T.Errorf("Where with a float condition: no error")
	}
}

// skipLarge reports whether to leave out shape s for dtype dt: the largest
// shapes, there to cross the threshold of parallel work, run for Float32
// only, which keeps the suite fast.
func skipLarge(s backend.Shape, dt backend.DType) bool {
	return s.NumElements() > 10000 && dt != backend.Float32
}
