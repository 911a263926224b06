package optim_test

import (
	"math"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// TestUpdateScale checks that an update scale s multiplies a step's
// displacement by s for SGD (with weight decay and momentum, fused or not)
// and LARS (whose trust ratio makes the gradient's scale irrelevant), and
// leaves other parameters alone.
func TestUpdateScale(t *testing.T) {
	mk := map[string]func(ps []*autograd.Var) optim.Optimizer{
		"sgd": func(ps []*autograd.Var) optim.Optimizer {
			return optim.NewSGD([]*optim.Group{optim.NewGroup(ps, nil, 0.1, 0.01)}, optim.SGDOptions{Momentum: 0.9, Nesterov: true})
		},
		"lars": func(ps []*autograd.Var) optim.Optimizer {
			return optim.NewLARS(optim.SplitForLARS(ps, nil, 2, 0.01), optim.LARSOptions{Momentum: 0.9})
		},
	}
	for name, newOpt := range mk {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			disp := func(s float64) [][]float64 {
				g := tensor.NewGenerator(7)
				w := autograd.Param(g.Normal(tensor.Shape{6, 5}, 0, 1, tensor.Of(dt)))
				b := autograd.Param(g.Normal(tensor.Shape{5}, 0, 1, tensor.Of(dt)))
				ps := []*autograd.Var{w, b}
				o := newOpt(ps)
				defer o.Release()
				var before [][]float64
				for _, p := range ps {
					before = append(before, tensor.ToSlice[float64](p.Value))
					p.SetGrad(g.Normal(p.Value.Shape(), 0, 1, tensor.Of(dt)))
				}
				o.(optim.UpdateScaler).SetUpdateScale(w, s)
				o.(optim.UpdateScaler).SetUpdateScale(b, s)
				o.Step()
				var out [][]float64
				for i, p := range ps {
					d := tensor.ToSlice[float64](p.Value)
					for j := range d {
						d[j] -= before[i][j]
					}
					out = append(out, d)
				}
				return out
			}
			one, three := disp(1), disp(3)
			// Displacements are differences of values near 1: float32
			// rounds them to about 1e-7 absolute.
			atol := 1e-12
			if dt == tensor.Float32 {
				atol = 1e-6
			}
			for i := range one {
				for j := range one[i] {
					if math.Abs(three[i][j]-3*one[i][j]) > 1e-5*math.Abs(3*one[i][j])+atol || one[i][j] == 0 {
						t.Fatalf("%s %v: parameter %d element %d moved %v with scale 3, %v with scale 1", name, dt, i, j, three[i][j], one[i][j])
					}
				}
			}
		}
	}
}
