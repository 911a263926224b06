package autograd

import (
	"fmt"
	"math"
	"strings"

	"github.com/flockml/flock/tensor"
)

// GradcheckOptions tune Gradcheck. Zero fields take the defaults of
// torch.autograd.gradcheck: Eps 1e-6, Atol 1e-5, Rtol 1e-3.
type GradcheckOptions struct {
	Eps, Atol, Rtol float64
	// Seed picks the random projection of the output onto a scalar.
	Seed uint64
}

// Gradcheck compares the gradients that Backward computes for f with
// central finite differences, in float64.
//
// Float inputs are converted to float64 and passed as Vars that require a
// gradient; other inputs (indices, masks) are passed as constants. The
// output y is projected onto the scalar L = Σ w·y with fixed random weights
// w, and for every element x_j of every float input the analytic ∂L/∂x_j is
// compared with (L(x_j+ε) − L(x_j−ε))/2ε; they must agree within
// Atol + Rtol·|numeric|. f must be deterministic (seed any randomness).
func Gradcheck(f func(xs []*Var) *Var, inputs []*tensor.Tensor, opt GradcheckOptions) error {
	if opt.Eps == 0 {
		opt.Eps = 1e-6
	}
	if opt.Atol == 0 {
		opt.Atol = 1e-5
	}
	if opt.Rtol == 0 {
		opt.Rtol = 1e-3
	}
	vals := make([][]float64, len(inputs))
	isFloat := make([]bool, len(inputs))
	for i, x := range inputs {
		isFloat[i] = x.DType().IsFloat()
		if isFloat[i] {
			vals[i] = x.Float64s()
		}
	}
	makeVars := func(grad bool) []*Var {
		vs := make([]*Var, len(inputs))
		for i, x := range inputs {
			if isFloat[i] {
				vs[i] = NewVar(tensor.FromSlice(vals[i], x.Shape().Clone(), tensor.On(x.Device())), grad)
			} else {
				vs[i] = Const(x.Retain())
			}
		}
		return vs
	}
	release := func(vs []*Var) {
		for _, v := range vs {
			v.Release()
		}
	}

	xs := makeVars(true)
	defer release(xs)
	y := f(xs)
	defer y.Release()
	if y.Value.DType() != tensor.Float64 {
		return fmt.Errorf("autograd: gradcheck: f returned %v; it must compute in float64 from float64 inputs", y.Value.DType())
	}
	w := tensor.NewGenerator(opt.Seed).Randn(y.Value.Shape().Clone(), tensor.Of(tensor.Float64), tensor.On(y.Value.Device()))
	defer w.Release()
	if !y.RequiresGrad() {
		return fmt.Errorf("autograd: gradcheck: the output does not require a gradient")
	}
	y.BackwardWith(w)

	loss := func() float64 {
		var l float64
		NoGrad(func() {
			vs := makeVars(false)
			defer release(vs)
			out := f(vs)
			defer out.Release()
			p := out.Value.Mul(w)
			defer p.Release()
			s := p.Sum()
			defer s.Release()
			l = s.Item()
		})
		return l
	}

	var problems []string
	for i := range inputs {
		if !isFloat[i] {
			continue
		}
		var analytic []float64
		if g := xs[i].Grad(); g != nil {
			analytic = g.Float64s()
		} else {
			analytic = make([]float64, len(vals[i]))
		}
		for j := range vals[i] {
			orig := vals[i][j]
			vals[i][j] = orig + opt.Eps
			lp := loss()
			vals[i][j] = orig - opt.Eps
			lm := loss()
			vals[i][j] = orig
			numeric := (lp - lm) / (2 * opt.Eps)
			if d := math.Abs(analytic[j] - numeric); !(d <= opt.Atol+opt.Rtol*math.Abs(numeric)) {
				if len(problems) < 8 {
					problems = append(problems, fmt.Sprintf("input %d element %d: analytic %.8g, numeric %.8g", i, j, analytic[j], numeric))
				}
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("autograd: gradcheck: gradients disagree:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}
