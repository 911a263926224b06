package autograd_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// opCase is one Gradcheck of an op: f applied to inputs (float inputs
// become float64 Vars that require gradients, others constants).
type opCase struct {
	name   string
	f      func(xs []*autograd.Var) *autograd.Var
	inputs []*tensor.Tensor
}

// normal returns float64 samples of N(0, 1).
func randn64(seed uint64, shape ...int) *tensor.Tensor {
	return tensor.NewGenerator(seed).Randn(tensor.Shape(shape), tensor.Of(tensor.Float64))
}

// uniform returns float64 samples of U[lo, hi).
func uniform64(seed uint64, lo, hi float64, shape ...int) *tensor.Tensor {
	return tensor.NewGenerator(seed).Uniform(tensor.Shape(shape), lo, hi, tensor.Of(tensor.Float64))
}

// f64 returns a float64 tensor holding vals.
func f64(vals []float64, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(vals, tensor.Shape(shape))
}

// unaryOp and binaryOp adapt ops to Gradcheck's signature.
func unaryOp(op func(*autograd.Var) *autograd.Var) func([]*autograd.Var) *autograd.Var {
	return func(xs []*autograd.Var) *autograd.Var { return op(xs[0]) }
}

func binaryOp(op func(a, b *autograd.Var) *autograd.Var) func([]*autograd.Var) *autograd.Var {
	return func(xs []*autograd.Var) *autograd.Var { return op(xs[0], xs[1]) }
}

// checkOps runs every case as a parallel subtest: Gradcheck in float64;
// then the gradients computed with only one input requiring a gradient must
// equal those computed with all (so skipping inputs that need none changes
// nothing), and gradients computed in float32 must agree with the float64
// ones.
func checkOps(t *testing.T, cases []opCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				for _, x := range c.inputs {
					x.Release()
				}
			}()
			if err := autograd.Gradcheck(c.f, c.inputs, autograd.GradcheckOptions{Seed: 11}); err != nil {
				t.Fatal(err)
			}
			all := func(int) bool { return true }
			g64 := gradientsIn(t, c, tensor.Float64, all)
			for i, x := range c.inputs {
				if !x.DType().IsFloat() {
					continue
				}
				only := gradientsIn(t, c, tensor.Float64, func(j int) bool { return j == i })
				for j := range only {
					if j != i && only[j] != nil {
						t.Errorf("input %d got a gradient although only input %d requires one", j, i)
					}
				}
				checkClose(t, fmt.Sprintf("gradient of input %d when it alone requires one", i), only[i], g64[i], 0)
			}
			g32 := gradientsIn(t, c, tensor.Float32, all)
			for i := range g64 {
				for j := range g64[i] {
					if d := math.Abs(g32[i][j] - g64[i][j]); !(d <= 1e-4+1e-3*math.Abs(g64[i][j])) {
						t.Errorf("float32 gradient of input %d element %d: %g, float64 gives %g", i, j, g32[i][j], g64[i][j])
					}
				}
			}
		})
	}
}

// gradientsIn computes the gradients of Σ w·f(inputs), w fixed, with the
// float inputs converted to dt and input i requiring a gradient when
// needs(i), checking that f keeps dt. Entry i is nil for an input that
// requires none and zeros for one that got none.
func gradientsIn(t *testing.T, c opCase, dt tensor.DType, needs func(i int) bool) [][]float64 {
	t.Helper()
	xs := make([]*autograd.Var, len(c.inputs))
	for i, x := range c.inputs {
		if x.DType().IsFloat() {
			xs[i] = autograd.NewVar(x.Cast(dt), needs(i))
		} else {
			xs[i] = autograd.Const(x.Retain())
		}
	}
	defer func() {
		for _, x := range xs {
			x.Release()
		}
	}()
	y := c.f(xs)
	defer y.Release()
	if y.Value.DType() != dt {
		t.Fatalf("%v inputs gave a %v output", dt, y.Value.DType())
	}
	w64 := tensor.NewGenerator(5).Randn(y.Shape().Clone(), tensor.Of(tensor.Float64))
	defer w64.Release()
	w := w64.Cast(dt)
	defer w.Release()
	y.BackwardWith(w)
	out := make([][]float64, len(xs))
	for i, x := range xs {
		g := x.Grad()
		switch {
		case !x.RequiresGrad():
			if g != nil {
				out[i] = g.Float64s()
			}
		case g == nil:
			out[i] = make([]float64, x.Value.NumElements())
		case g.DType() != dt:
			t.Fatalf("gradient of a %v input is %v", dt, g.DType())
		default:
			out[i] = g.Float64s()
		}
	}
	return out
}

func TestElementwiseGradients(t *testing.T) {
	t.Parallel()
	cases := []opCase{
		{"Add/same", binaryOp(autograd.Add), []*tensor.Tensor{randn64(1, 3, 4), randn64(2, 3, 4)}},
		{"Add/trailing", binaryOp(autograd.Add), []*tensor.Tensor{randn64(1, 2, 3, 4), randn64(2, 4)}},
		{"Add/both", binaryOp(autograd.Add), []*tensor.Tensor{randn64(1, 2, 1, 4), randn64(2, 3, 1)}},
		{"Add/scalar", binaryOp(autograd.Add), []*tensor.Tensor{randn64(1), randn64(2, 2, 3)}},
		{"Add/empty", binaryOp(autograd.Add), []*tensor.Tensor{randn64(1, 0, 3), randn64(2, 1, 3)}},
		{"Sub/same", binaryOp(autograd.Sub), []*tensor.Tensor{randn64(3, 5), randn64(4, 5)}},
		{"Sub/both", binaryOp(autograd.Sub), []*tensor.Tensor{randn64(3, 4, 1), randn64(4, 1, 3)}},
		{"Mul/same", binaryOp(autograd.Mul), []*tensor.Tensor{randn64(5, 2, 3), randn64(6, 2, 3)}},
		{"Mul/both", binaryOp(autograd.Mul), []*tensor.Tensor{randn64(5, 3, 1, 2), randn64(6, 4, 1)}},
		{"Mul/self", func(xs []*autograd.Var) *autograd.Var { return autograd.Mul(xs[0], xs[0]) }, []*tensor.Tensor{randn64(7, 6)}},
		{"Div/same", binaryOp(autograd.Div), []*tensor.Tensor{randn64(8, 3, 3), uniform64(9, 0.5, 2, 3, 3)}},
		{"Div/both", binaryOp(autograd.Div), []*tensor.Tensor{randn64(8, 1, 4), uniform64(9, -2, -0.5, 3, 1)}},
		{"Neg", unaryOp(autograd.Neg), []*tensor.Tensor{randn64(10, 3, 4)}},
		{"Exp", unaryOp(autograd.Exp), []*tensor.Tensor{randn64(11, 3, 4)}},
		{"Log", unaryOp(autograd.Log), []*tensor.Tensor{uniform64(12, 0.2, 3, 3, 4)}},
		{"Sqrt", unaryOp(autograd.Sqrt), []*tensor.Tensor{uniform64(13, 0.2, 3, 3, 4)}},
		{"Rsqrt", unaryOp(autograd.Rsqrt), []*tensor.Tensor{uniform64(14, 0.2, 3, 3, 4)}},
		{"Tanh", unaryOp(autograd.Tanh), []*tensor.Tensor{randn64(15, 3, 4)}},
		{"Sigmoid", unaryOp(autograd.Sigmoid), []*tensor.Tensor{randn64(16, 3, 4)}},
		{"ReLU", unaryOp(autograd.ReLU), []*tensor.Tensor{randn64(17, 4, 5)}},
		{"GELU", unaryOp(autograd.GELU), []*tensor.Tensor{randn64(18, 4, 5)}},
		{"GELUTanh", unaryOp(autograd.GELUTanh), []*tensor.Tensor{randn64(19, 4, 5)}},
		{"Abs", unaryOp(autograd.Abs), []*tensor.Tensor{randn64(20, 4, 5)}},
		{"Erf", unaryOp(autograd.Erf), []*tensor.Tensor{randn64(21, 4, 5)}},
		{"Square", unaryOp(autograd.Square), []*tensor.Tensor{randn64(22, 4, 5)}},
		{"Reciprocal", unaryOp(autograd.Reciprocal), []*tensor.Tensor{uniform64(23, 0.3, 3, 4, 5)}},
		{"Reciprocal/scalar", unaryOp(autograd.Reciprocal), []*tensor.Tensor{f64([]float64{-1.7})}},
		{"Pow/same", binaryOp(autograd.Pow), []*tensor.Tensor{uniform64(24, 0.3, 2, 3, 4), randn64(25, 3, 4)}},
		{"Pow/both", binaryOp(autograd.Pow), []*tensor.Tensor{uniform64(24, 0.3, 2, 3, 1), randn64(25, 1, 4)}},
		{"Maximum/same", binaryOp(autograd.Maximum), []*tensor.Tensor{randn64(26, 3, 4), randn64(27, 3, 4)}},
		{"Maximum/both", binaryOp(autograd.Maximum), []*tensor.Tensor{randn64(26, 3, 1), randn64(27, 1, 4)}},
		// Central differences at a tie of two give ½ to each, which is the
		// split Maximum and Minimum make.
		{"Maximum/ties", binaryOp(autograd.Maximum), []*tensor.Tensor{f64([]float64{1, 2, -3, 4}, 4), f64([]float64{1, 0, -3, 5}, 4)}},
		{"Minimum/same", binaryOp(autograd.Minimum), []*tensor.Tensor{randn64(28, 3, 4), randn64(29, 3, 4)}},
		{"Minimum/both", binaryOp(autograd.Minimum), []*tensor.Tensor{randn64(28, 2, 3, 1), randn64(29, 4)}},
		{"Minimum/ties", binaryOp(autograd.Minimum), []*tensor.Tensor{f64([]float64{1, 2, -3, 4}, 4), f64([]float64{1, 0, -3, 5}, 4)}},
	}
	for _, p := range []float64{3, 2.5, 1, -1.5, 0} {
		x := randn64(30, 3, 4)
		if p != math.Trunc(p) || p < 0 {
			x.Release()
			x = uniform64(30, 0.3, 2, 3, 4)
		}
		cases = append(cases, opCase{fmt.Sprintf("PowScalar/%g", p), func(xs []*autograd.Var) *autograd.Var {
			return autograd.PowScalar(xs[0], p)
		}, []*tensor.Tensor{x}})
	}
	cases = append(cases,
		opCase{"AddScalar", func(xs []*autograd.Var) *autograd.Var { return autograd.AddScalar(xs[0], 2.5) }, []*tensor.Tensor{randn64(31, 3, 4)}},
		opCase{"MulScalar", func(xs []*autograd.Var) *autograd.Var { return autograd.MulScalar(xs[0], -1.5) }, []*tensor.Tensor{randn64(32, 3, 4)}},
		opCase{"Where/same", func(xs []*autograd.Var) *autograd.Var { return autograd.Where(xs[0].Value, xs[1], xs[2]) },
			[]*tensor.Tensor{tensor.FromSlice([]bool{true, false, false, true, true, false}, tensor.Shape{2, 3}), randn64(33, 2, 3), randn64(34, 2, 3)}},
		opCase{"Where/broadcast", func(xs []*autograd.Var) *autograd.Var { return autograd.Where(xs[0].Value, xs[1], xs[2]) },
			[]*tensor.Tensor{tensor.FromSlice([]bool{true, false, true}, tensor.Shape{3, 1}), randn64(33, 4), randn64(34, 3, 1)}},
		opCase{"composite", func(xs []*autograd.Var) *autograd.Var {
			// tanh(a·b + a/b²) − exp(−a): a used three times, b twice.
			a, b := xs[0], xs[1]
			return autograd.Sub(autograd.Tanh(autograd.Add(autograd.Mul(a, b), autograd.Div(a, autograd.Square(b)))), autograd.Exp(autograd.Neg(a)))
		}, []*tensor.Tensor{randn64(35, 2, 3), uniform64(36, 0.5, 1.5, 3)}},
	)
	checkOps(t, cases)
}

// TestElementwiseSpecialPoints checks the conventions at points where the
// derivative is not defined, against PyTorch's choices.
func TestElementwiseSpecialPoints(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		f      func(a, b *autograd.Var) *autograd.Var
		a, b   []float64
		ga, gb []float64
	}{
		{"ReLU at 0", func(a, _ *autograd.Var) *autograd.Var { return autograd.ReLU(a) },
			[]float64{-1, 0, 2}, nil, []float64{0, 0, 1}, nil},
		{"Abs at 0", func(a, _ *autograd.Var) *autograd.Var { return autograd.Abs(a) },
			[]float64{-1, 0, 2}, nil, []float64{-1, 0, 1}, nil},
		{"Maximum ties", autograd.Maximum,
			[]float64{1, 2, 3}, []float64{1, 0, 4}, []float64{0.5, 1, 0}, []float64{0.5, 0, 1}},
		{"Minimum ties", autograd.Minimum,
			[]float64{1, 2, 3}, []float64{1, 0, 4}, []float64{0.5, 0, 1}, []float64{0.5, 1, 0}},
		{"Pow base 0", autograd.Pow,
			[]float64{0, 0, 2}, []float64{2, 0, 3}, []float64{0, 0, 12}, []float64{0, 0, 8 * math.Log(2)}},
		{"PowScalar 0 at 0", func(a, _ *autograd.Var) *autograd.Var { return autograd.PowScalar(a, 0) },
			[]float64{0, 1, -2}, nil, []float64{0, 0, 0}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := autograd.Param(f64(c.a, len(c.a)))
			defer a.Release()
			var b *autograd.Var
			if c.b != nil {
				b = autograd.Param(f64(c.b, len(c.b)))
				defer b.Release()
			}
			y := autograd.Sum(c.f(a, b))
			defer y.Release()
			y.Backward()
			checkClose(t, "gradient of a", a.Grad().Float64s(), c.ga, 1e-12)
			if b != nil {
				checkClose(t, "gradient of b", b.Grad().Float64s(), c.gb, 1e-12)
			}
		})
	}
}

// checkClose reports the elements of got that differ from want by more than
// tol·(1+|want|).
func checkClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*(1+math.Abs(want[i]))) {
			t.Errorf("%s: element %d is %g, want %g", what, i, got[i], want[i])
		}
	}
}
