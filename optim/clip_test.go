package optim_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// gradParams returns parameters of the given shapes in dtype dt whose
// gradients are the element values a pseudo-random walk gives, scaled by
// scale; a nil shape gives a parameter without a gradient.
func gradParams(t *testing.T, dt tensor.DType, scale float64, shapes ...tensor.Shape) []*autograd.Var {
	t.Helper()
	var ps []*autograd.Var
	x := 0.37
	for _, sh := range shapes {
		if sh == nil {
			ps = append(ps, autograd.Param(tensor.Ones(tensor.Shape{2}, tensor.Of(dt))))
			continue
		}
		g := make([]float64, sh.NumElements())
		for i := range g {
			x = math.Mod(x*9301+0.49297, 1)
			g[i] = scale * (2*x - 1)
		}
		p := autograd.Param(tensor.Zeros(sh, tensor.Of(dt)))
		p.SetGrad(tensor.FromSlice(g, sh).Cast(dt))
		ps = append(ps, p)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			p.Release()
		}
	})
	return ps
}

// grads returns each parameter's gradient as float64s (nil when absent).
func grads(ps []*autograd.Var) [][]float64 {
	var out [][]float64
	for _, p := range ps {
		if g := p.Grad(); g != nil {
			out = append(out, g.Float64s())
		} else {
			out = append(out, nil)
		}
	}
	return out
}

func TestClipGradNorm(t *testing.T) {
	t.Parallel()
	shapes := []tensor.Shape{{3, 4}, nil, {5}, {}, {2, 3, 2}}
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
		tol := map[tensor.DType]float64{tensor.Float64: 1e-14, tensor.Float32: 1e-6}[dt]
		for _, tc := range []struct {
			name    string
			scale   float64
			maxNorm float64
		}{
			{"clipped", 1, 0.5},
			{"clipped hard", 100, 1e-3},
			{"small", 0.01, 1},
			{"far below", 1, 1e9},
		} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				ps := gradParams(t, dt, tc.scale, shapes...)
				before := grads(ps)
				var sq float64
				for _, g := range before {
					for _, v := range g {
						sq += v * v
					}
				}
				want := math.Sqrt(sq)

				got := optim.ClipGradNorm(ps, tc.maxNorm)
				if math.Abs(got-want) > tol*want {
					t.Fatalf("ClipGradNorm returned %.17g, want the pre-clip norm %.17g", got, want)
				}
				after := grads(ps)
				if after[1] != nil {
					t.Fatalf("a parameter without a gradient got one")
				}
				if want <= tc.maxNorm {
					for i := range before {
						if !slices.Equal(before[i], after[i]) {
							t.Errorf("gradient %d changed though the norm %v is within %v", i, want, tc.maxNorm)
						}
					}
					return
				}
				coef := tc.maxNorm / (want + 1e-6)
				var sqAfter float64
				for i := range before {
					for j, v := range before[i] {
						w := v * coef
						if math.Abs(after[i][j]-w) > tol*math.Abs(w)+1e-300 {
							t.Errorf("gradient %d element %d = %v, want %v", i, j, after[i][j], w)
						}
						sqAfter += after[i][j] * after[i][j]
					}
				}
				if n := math.Sqrt(sqAfter); n > tc.maxNorm*(1+tol) || n < tc.maxNorm*(1-1e-5) {
					t.Errorf("norm after clipping %v, want just under %v", n, tc.maxNorm)
				}
			})
		}
	}
}

func TestClipGradNormNoGradients(t *testing.T) {
	t.Parallel()
	ps := gradParams(t, tensor.Float64, 1, nil, nil)
	if n := optim.ClipGradNorm(ps, 1); n != 0 {
		t.Errorf("norm of no gradients = %v", n)
	}
	if n := optim.ClipGradNorm(nil, 1); n != 0 {
		t.Errorf("norm of no parameters = %v", n)
	}
}
