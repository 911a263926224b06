package autograd_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// gradCase is one Gradcheck of an op: f applied to inputs (float inputs
// become float64 Vars that require gradients, integer and Bool inputs are
// passed as constants).
type gradCase struct {
	name   string
	inputs []*tensor.Tensor
	f      func(xs []*autograd.Var) *autograd.Var
	opt    autograd.GradcheckOptions
}

// runGradCases runs Gradcheck on every case, then checkPartialGrads.
func runGradCases(t *testing.T, cases []gradCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Cleanup(func() {
				for _, x := range c.inputs {
					x.Release()
				}
			})
			if err := autograd.Gradcheck(c.f, c.inputs, c.opt); err != nil {
				t.Fatal(err)
			}
			checkPartialGrads(t, c)
		})
	}
}

// checkPartialGrads runs f once with every float input requiring a
// gradient and once per float input with only that one requiring it; the
// gradients must be equal, so that skipping the inputs that need none
// (Context.Needs) changes nothing. It also checks that the backward pass
// released everything the graph saved: afterwards no input value is shared.
func checkPartialGrads(t *testing.T, c gradCase) {
	t.Helper()
	run := func(needs func(i int) bool) []*tensor.Tensor {
		xs := make([]*autograd.Var, len(c.inputs))
		for i, x := range c.inputs {
			if x.DType().IsFloat() {
				xs[i] = autograd.NewVar(x.Cast(tensor.Float64), needs(i))
			} else {
				xs[i] = autograd.Const(x.Clone())
			}
		}
		y := c.f(xs)
		w := tensor.NewGenerator(3).Randn(y.Value.Shape().Clone(), tensor.Of(tensor.Float64))
		y.BackwardWith(w)
		w.Release()
		y.Release()
		grads := make([]*tensor.Tensor, len(xs))
		for i, x := range xs {
			if !x.Value.Exclusive() {
				t.Errorf("input %d is still shared after Backward: the graph kept a reference to it", i)
			}
			if g := x.Grad(); g != nil {
				grads[i] = g.Retain()
			}
			x.Release()
		}
		return grads
	}
	all := run(func(int) bool { return true })
	defer releaseAll(all)
	for i, x := range c.inputs {
		if !x.DType().IsFloat() {
			continue
		}
		one := run(func(j int) bool { return j == i })
		for j, g := range one {
			switch {
			case j != i && g != nil:
				t.Errorf("input %d got a gradient although only input %d requires one", j, i)
			case j == i && g == nil:
				t.Errorf("input %d got no gradient when it alone requires one", i)
			case j == i:
				if d := maxAbsDiff(g, all[i]); d > 1e-12 {
					t.Errorf("input %d: gradient differs by %g when it alone requires one", i, d)
				}
			}
		}
		releaseAll(one)
	}
}

func releaseAll(ts []*tensor.Tensor) {
	for _, t := range ts {
		t.Release()
	}
}

func maxAbsDiff(a, b *tensor.Tensor) float64 {
	if !a.Shape().Equal(b.Shape()) {
		return math.Inf(1)
	}
	x, y := a.Float64s(), b.Float64s()
	d := 0.0
	for i := range x {
		d = max(d, math.Abs(x[i]-y[i]))
	}
	return d
}

// normal returns float64 samples of N(0, 1) of the given shape.
func normal(seed uint64, shape ...int) *tensor.Tensor {
	return tensor.NewGenerator(seed).Randn(tensor.Shape(shape), tensor.Of(tensor.Float64))
}

// uniform returns float64 samples of U[lo, hi) of the given shape.
func uniform(seed uint64, lo, hi float64, shape ...int) *tensor.Tensor {
	return tensor.NewGenerator(seed).Uniform(tensor.Shape(shape), lo, hi, tensor.Of(tensor.Float64))
}

func ints(shape tensor.Shape, vals ...int64) *tensor.Tensor {
	return tensor.FromSlice(vals, shape)
}

func TestMatMulGrad(t *testing.T) {
	mm := func(xs []*autograd.Var) *autograd.Var { return autograd.MatMul(xs[0], xs[1]) }
	shapes := []struct{ a, b []int }{
		{[]int{3, 4}, []int{4, 5}},
		{[]int{4}, []int{4}},
		{[]int{4}, []int{4, 3}},
		{[]int{3, 4}, []int{4}},
		{[]int{1, 1}, []int{1, 1}},
		{[]int{2, 3, 4}, []int{2, 4, 5}},
		{[]int{2, 1, 3, 4}, []int{3, 4, 2}},
		{[]int{4}, []int{2, 4, 3}},
		{[]int{2, 3, 4}, []int{4}},
		{[]int{3, 4}, []int{2, 4, 5}},
		{[]int{2, 3, 4}, []int{4, 5}},
	}
	var cases []gradCase
	for i, s := range shapes {
		cases = append(cases, gradCase{
			name:   fmt.Sprintf("%vx%v", s.a, s.b),
			inputs: []*tensor.Tensor{normal(uint64(10*i+1), s.a...), normal(uint64(10*i+2), s.b...)},
			f:      mm,
		})
	}
	cases = append(cases,
		gradCase{
			name:   "transposed operands",
			inputs: []*tensor.Tensor{normal(91, 4, 3), normal(92, 2, 5, 4)},
			f: func(xs []*autograd.Var) *autograd.Var {
				at := autograd.Transpose(xs[0], 0, 1)
				defer at.Release()
				bt := autograd.Transpose(xs[1], 1, 2)
				defer bt.Release()
				return autograd.MatMul(at, bt)
			},
		},
		gradCase{
			name:   "transposed batch times matrix",
			inputs: []*tensor.Tensor{normal(94, 2, 4, 3), normal(95, 4, 5)},
			f: func(xs []*autograd.Var) *autograd.Var {
				at := autograd.Transpose(xs[0], 1, 2)
				defer at.Release()
				return autograd.MatMul(at, xs[1])
			},
		},
		gradCase{
			name:   "operand used twice",
			inputs: []*tensor.Tensor{normal(93, 3, 3)},
			f:      func(xs []*autograd.Var) *autograd.Var { return autograd.MatMul(xs[0], xs[0]) },
		},
	)
	runGradCases(t, cases)
}

// TestMatMulShapes checks the result shapes of torch.matmul's promotion
// rules, and the values against a float64 reference.
func TestMatMulShapes(t *testing.T) {
	cases := []struct {
		a, b, want []int
	}{
		{[]int{4}, []int{4}, []int{}},
		{[]int{4}, []int{4, 3}, []int{3}},
		{[]int{3, 4}, []int{4}, []int{3}},
		{[]int{2, 1, 3, 4}, []int{3, 4, 2}, []int{2, 3, 3, 2}},
		{[]int{4}, []int{2, 4, 3}, []int{2, 3}},
	}
	for _, c := range cases {
		a := autograd.Param(normal(1, c.a...))
		b := autograd.Param(normal(2, c.b...))
		y := autograd.MatMul(a, b)
		if !y.Value.Shape().Equal(tensor.Shape(c.want)) {
			t.Errorf("MatMul(%v, %v) has shape %v, want %v", c.a, c.b, y.Value.Shape(), c.want)
		}
		y.Release()
		a.Release()
		b.Release()
	}

	// [2,1,2,3] · [3,3,2]: out[i,j] = A[i,0] · B[j].
	av, bv := normal(5, 2, 1, 2, 3), normal(6, 3, 3, 2)
	a, b := autograd.Const(av), autograd.Const(bv)
	defer a.Release()
	defer b.Release()
	y := autograd.MatMul(a, b)
	defer y.Release()
	A, B, Y := av.Float64s(), bv.Float64s(), y.Value.Float64s()
	for i := range 2 {
		for j := range 3 {
			for m := range 2 {
				for n := range 2 {
					var want float64
					for k := range 3 {
						want += A[i*6+m*3+k] * B[j*6+k*2+n]
					}
					if got := Y[((i*3+j)*2+m)*2+n]; math.Abs(got-want) > 1e-12 {
						t.Errorf("out[%d,%d,%d,%d] = %v, want %v", i, j, m, n, got, want)
					}
				}
			}
		}
	}
}

func TestLinearGrad(t *testing.T) {
	withBias := func(xs []*autograd.Var) *autograd.Var { return autograd.Linear(xs[0], xs[1], xs[2]) }
	noBias := func(xs []*autograd.Var) *autograd.Var { return autograd.Linear(xs[0], xs[1], nil) }
	runGradCases(t, []gradCase{
		{name: "matrix", inputs: []*tensor.Tensor{normal(1, 5, 3), normal(2, 4, 3), normal(3, 4)}, f: withBias},
		{name: "batched", inputs: []*tensor.Tensor{normal(4, 2, 3, 3), normal(5, 2, 3), normal(6, 2)}, f: withBias},
		{name: "vector", inputs: []*tensor.Tensor{normal(7, 3), normal(8, 4, 3), normal(9, 4)}, f: withBias},
		{name: "no bias", inputs: []*tensor.Tensor{normal(10, 5, 3), normal(11, 4, 3)}, f: noBias},
		{name: "single output", inputs: []*tensor.Tensor{normal(12, 6, 2), normal(13, 1, 2), normal(14, 1)}, f: withBias},
	})
}

// TestStridedOutputGradients runs every op under a Sum over axis 0 and
// under a transpose, whose backward passes hand the op an output gradient
// that is a broadcast (stride-0) or a permuted view rather than a
// contiguous tensor.
func TestStridedOutputGradients(t *testing.T) {
	conv := tensor.ConvParams{StrideH: 2, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1, Groups: 1}
	pool := tensor.PoolParams{KernelH: 2, KernelW: 2, StrideH: 1, StrideW: 2}
	ops := []struct {
		name   string
		inputs func() []*tensor.Tensor
		f      func(xs []*autograd.Var) *autograd.Var
	}{
		{"MatMul", func() []*tensor.Tensor { return []*tensor.Tensor{normal(1, 2, 3, 4), normal(2, 4, 2)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.MatMul(xs[0], xs[1]) }},
		{"Linear", func() []*tensor.Tensor { return []*tensor.Tensor{normal(3, 3, 4), normal(4, 2, 4), normal(5, 2)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.Linear(xs[0], xs[1], xs[2]) }},
		{"Conv2d", func() []*tensor.Tensor {
			return []*tensor.Tensor{normal(6, 2, 2, 4, 3), normal(7, 3, 2, 3, 3), normal(8, 3)}
		}, func(xs []*autograd.Var) *autograd.Var { return autograd.Conv2d(xs[0], xs[1], xs[2], conv) }},
		{"MaxPool2d", func() []*tensor.Tensor { return []*tensor.Tensor{normal(9, 2, 2, 4, 5)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.MaxPool2d(xs[0], pool) }},
		{"AvgPool2d", func() []*tensor.Tensor { return []*tensor.Tensor{normal(10, 2, 2, 4, 5)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.AvgPool2d(xs[0], pool) }},
		{"Softmax", func() []*tensor.Tensor { return []*tensor.Tensor{normal(11, 3, 4)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.Softmax(xs[0], -1) }},
		{"LogSoftmax", func() []*tensor.Tensor { return []*tensor.Tensor{normal(12, 3, 4)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.LogSoftmax(xs[0], 0) }},
		{"CrossEntropy", func() []*tensor.Tensor {
			return []*tensor.Tensor{normal(13, 2, 3, 3), ints(tensor.Shape{2, 3}, 0, 2, 1, 1, 0, 2)}
		},
			func(xs []*autograd.Var) *autograd.Var {
				return autograd.CrossEntropy(xs[0], xs[1].Value, autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone, LabelSmoothing: 0.1})
			}},
		{"MSELoss", func() []*tensor.Tensor { return []*tensor.Tensor{normal(14, 3, 4), normal(15, 4)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.MSELoss(xs[0], xs[1], autograd.ReductionNone) }},
		{"BatchNorm", func() []*tensor.Tensor { return []*tensor.Tensor{normal(16, 3, 2, 2), normal(17, 2), normal(18, 2)} },
			func(xs []*autograd.Var) *autograd.Var {
				return autograd.BatchNorm(xs[0], xs[1], xs[2], nil, nil, tensor.NormParams{Eps: 1e-5, Training: true})
			}},
		{"LayerNorm", func() []*tensor.Tensor { return []*tensor.Tensor{normal(19, 3, 4), normal(20, 4), normal(21, 4)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.LayerNorm(xs[0], xs[1], xs[2], 4, 1e-5) }},
		{"Dropout", func() []*tensor.Tensor { return []*tensor.Tensor{normal(22, 3, 4)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.Dropout(xs[0], 0.4, tensor.NewGenerator(5)) }},
		{"Gather", func() []*tensor.Tensor {
			return []*tensor.Tensor{normal(23, 3, 4), ints(tensor.Shape{3, 2}, 1, 1, 0, 3, 2, 0)}
		},
			func(xs []*autograd.Var) *autograd.Var { return autograd.Gather(xs[0], 1, xs[1].Value) }},
		{"IndexSelect", func() []*tensor.Tensor { return []*tensor.Tensor{normal(24, 3, 4), ints(tensor.Shape{3}, 2, 2, 0)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.IndexSelect(xs[0], 1, xs[1].Value) }},
		{"Embedding", func() []*tensor.Tensor { return []*tensor.Tensor{normal(25, 4, 3), ints(tensor.Shape{2}, 3, 3)} },
			func(xs []*autograd.Var) *autograd.Var { return autograd.Embedding(xs[0], xs[1].Value) }},
	}
	var cases []gradCase
	for _, op := range ops {
		cases = append(cases,
			gradCase{name: op.name + "/sum", inputs: op.inputs(), f: func(xs []*autograd.Var) *autograd.Var {
				y := op.f(xs)
				defer y.Release()
				return autograd.Sum(y, 0)
			}},
			gradCase{name: op.name + "/transpose", inputs: op.inputs(), f: func(xs []*autograd.Var) *autograd.Var {
				y := op.f(xs)
				defer y.Release()
				return autograd.Transpose(y, 0, -1)
			}})
	}
	runGradCases(t, cases)
}
