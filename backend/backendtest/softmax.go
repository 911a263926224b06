package backendtest

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

func init() { register("Softmax", checkSoftmax) }

// axisLines calls fn with the flat positions of each line of shape along axis.
func axisLines(shape backend.Shape, axis int, fn func(pos []int)) {
	outer, inner := 1, 1
	for _, d := range shape[:axis] {
		outer *= d
	}
	for _, d := range shape[axis+1:] {
		inner *= d
	}
	n := shape[axis]
	pos := make([]int, n)
	for o := range outer {
		for i := range inner {
			for d := range pos {
				pos[d] = (o*n+d)*inner + i
			}
			fn(pos)
		}
	}
}

// refSoftmax is softmax (or log-softmax) along axis, from the definition
// p_d = e^{x_d} / Σ_k e^{x_k} with both sides scaled by e^{−max x}.
func refSoftmax(x []float64, shape backend.Shape, axis int, log bool) []float64 {
	y := make([]float64, len(x))
	axisLines(shape, axis, func(pos []int) {
		m := math.Inf(-1)
		for _, p := range pos {
			m = math.Max(m, x[p])
		}
		z := 0.0
		for _, p := range pos {
			z += math.Exp(x[p] - m)
		}
		for _, p := range pos {
			if log {
				y[p] = x[p] - m - math.Log(z)
			} else {
				y[p] = math.Exp(x[p]-m) / z
			}
		}
	})
	return y
}

// refSoftmaxGrad applies the transposed Jacobian of (log-)softmax to dy:
// ∂p_k/∂x_d = p_k·(δ_kd − p_d) and ∂log p_k/∂x_d = δ_kd − p_d, with p read
// from the forward output y.
func refSoftmaxGrad(y, dy []float64, shape backend.Shape, axis int, log bool) []float64 {
	dx := make([]float64, len(y))
	axisLines(shape, axis, func(pos []int) {
		for _, pd := range pos {
			p := y[pd]
			if log {
				p = math.Exp(y[pd])
			}
			s := 0.0
			for _, pk := range pos {
				delta := 0.0
				if pk == pd {
					delta = 1
				}
				if log {
					s += dy[pk] * (delta - p)
				} else {
					s += dy[pk] * y[pk] * (delta - p)
				}
			}
			dx[pd] = s
		}
	})
	return dx
}

func checkSoftmax(e *Env) {
	cases := []struct {
		shape  backend.Shape
		axis   int
		lo, hi float64
	}{
		{backend.Shape{0}, 0, -3, 3},
		{backend.Shape{1}, 0, -3, 3},
		{backend.Shape{7}, 0, -3, 3},
		{backend.Shape{3, 0, 2}, 1, -3, 3},
		{backend.Shape{3, 0, 2}, 2, -3, 3},
		{backend.Shape{2, 3}, 0, -3, 3},
		{backend.Shape{2, 3}, 1, -3, 3},
		{backend.Shape{5, 1, 7}, 1, -3, 3},
		{backend.Shape{4, 3, 2, 5}, 2, -3, 3},
		{backend.Shape{4, 3, 2, 5}, 0, -3, 3},
		{backend.Shape{33, 65}, 1, -10, 10},
		{backend.Shape{3, 67, 45}, 1, -10, 10},
		{backend.Shape{129, 513}, 1, -10, 10},
		{backend.Shape{6, 11}, 1, -3000, 3000},
		{backend.Shape{2, 9, 37}, 1, 1e4, 1e4 + 50},
	}
	for _, dt := range FloatTypes {
		for _, c := range cases {
			for _, log := range []bool{false, true} {
				name := fmt.Sprintf("%v%v/axis=%d/log=%v/range=[%g,%g)", dt, c.shape, c.axis, log, c.lo, c.hi)
				x, xv := e.Random(dt, c.shape, false, c.lo, c.hi)
				y := e.Alloc(dt, c.shape)
				if err := e.B.Softmax(y, x, c.axis, log); err != nil {
					e.T.Errorf("Softmax %s: %v", name, err)
					continue
				}
				want := refSoftmax(xv, c.shape, c.axis, log)
				e.Close("Softmax "+name, e.Get(y), want, 4*Tol(dt), 4*Tol(dt)*Tol(dt))

				// Backward from the reference output rounded to dt.
				yv := make([]float64, len(want))
				for i, v := range want {
					yv[i] = Round(dt, v)
				}
				yIn := e.Alloc(dt, c.shape)
				e.Set(yIn, yv)
				dy, dyv := e.Random(dt, c.shape, false, -1, 1)
				dx := e.Alloc(dt, c.shape)
				if err := e.B.SoftmaxBackward(dx, yIn, dy, c.axis, log); err != nil {
					e.T.Errorf("SoftmaxBackward %s: %v", name, err)
					continue
				}
				e.Close("SoftmaxBackward "+name, e.Get(dx), refSoftmaxGrad(yv, dyv, c.shape, c.axis, log), 4*Tol(dt), Tol(dt))
			}
		}
	}
	checkSoftmaxErrors(e)
}

func checkSoftmaxErrors(e *Env) {
	dt := backend.Float32
	x, _ := e.Random(dt, backend.Shape{2, 3}, false, -1, 1)
	for _, axis := range []int{-1, 2} {
		if err := e.B.Softmax(e.Alloc(dt, backend.Shape{2, 3}), x, axis, false); err == nil {
			e.T.Errorf("Softmax with axis %d of shape [2 3]: no error", axis)
		}
	}
	if err := e.B.Softmax(e.Alloc(dt, backend.Shape{3, 2}), x, 1, false); err == nil {
		e.T.Errorf("Softmax into dst [3 2] from x [2 3]: no error")
	}
	if err := e.B.Softmax(e.Alloc(backend.Float64, backend.Shape{2, 3}), x, 1, true); err == nil {
		e.T.Errorf("Softmax into float64 dst from float32 x: no error")
	}
	if err := e.B.SoftmaxBackward(e.Alloc(dt, backend.Shape{2, 3}), x, e.Alloc(dt, backend.Shape{2, 2}), 1, false); err == nil {
		e.T.Errorf("SoftmaxBackward with dy [2 2] for y [2 3]: no error")
	}
}
