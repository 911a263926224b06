package cpu

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

var (
	_ backend.FusedSGD   = (*Backend)(nil)
	_ backend.FusedAdamW = (*Backend)(nil)
)

// optimGrain is the fewest parameters worth a goroutine of their own in an
// optimizer update.
const optimGrain = 1 << 15

// SGDStep implements backend.FusedSGD: one pass over param, grad and buf,
// in float64 arithmetic with each stored value rounded once.
func (c *Backend) SGDStep(param, grad, buf backend.View, p backend.SGDParams) error {
	const k = "cpu: sgd step"
	if err := optimArgs(k, param, grad); err != nil {
		return err
	}
	if p.Momentum != 0 {
		if err := backend.CheckDense(k, nil, "momentum buffer", buf, param.DType, param.Shape); err != nil {
			return err
		}
	}
	n := param.NumElements()
	switch param.DType {
	case backend.Float32:
		sgdStep(elems[float32](param, n), elems[float32](grad, n), elems[float32](buf, n), p)
	case backend.Float64:
		sgdStep(elems[float64](param, n), elems[float64](grad, n), elems[float64](buf, n), p)
	}
	return nil
}

// sgdBlock is the granule of the parallel split of an update: goroutines
// start at multiples of it, so the vector loops (which leave the last
// len mod 8 elements to Go) see the same elements whatever the number of
// goroutines.
const sgdBlock = 8

// sgdStep is SGDStep on slices; b is nil without momentum.
func sgdStep[T float](w, g, b []T, p backend.SGDParams) {
	lr, wd, mu, damp := p.LR, p.WeightDecay, p.Momentum, 1-p.Dampening
	w32, _ := any(w).([]float32)
	n := len(w)
	parallelFor((n+sgdBlock-1)/sgdBlock, optimGrain/sgdBlock, func(lo, hi int) {
		lo, hi = lo*sgdBlock, min(hi*sgdBlock, n)
		w, g := w[lo:hi], g[lo:hi]
		if w32 != nil && mu != 0 && !p.First {
			v := sgdMomentumVec(w32[lo:hi], any(g).([]float32), any(b).([]float32)[lo:hi], p)
			w, g = w[v:], g[v:]
			lo += v
		}
		if mu == 0 {
			for i, wi := range w {
				d := float64(g[i]) + wd*float64(wi)
				w[i] = T(float64(wi) - lr*d)
			}
			return
		}
		b := b[lo:hi]
		for i, wi := range w {
			d := float64(g[i]) + wd*float64(wi)
			bi := d
			if !p.First {
				bi = mu*float64(b[i]) + damp*d
			}
			b[i] = T(bi)
			if p.Nesterov {
				d += mu * bi
			} else {
				d = bi
			}
			w[i] = T(float64(wi) - lr*d)
		}
	})
}

// AdamWStep implements backend.FusedAdamW: one pass over param, grad and
// the moments, in float64 arithmetic with each stored value rounded once.
func (c *Backend) AdamWStep(param, grad, m, v backend.View, p backend.AdamWParams) error {
	const k = "cpu: adamw step"
	if err := optimArgs(k, param, grad); err != nil {
		return err
	}
	if err := backend.CheckDense(k, nil, "m", m, param.DType, param.Shape); err != nil {
		return err
	}
	if err := backend.CheckDense(k, nil, "v", v, param.DType, param.Shape); err != nil {
		return err
	}
	if p.Step < 1 {
		return fmt.Errorf("%s: step %d, want ≥ 1", k, p.Step)
	}
	n := param.NumElements()
	switch param.DType {
	case backend.Float32:
		adamWStep(elems[float32](param, n), elems[float32](grad, n), elems[float32](m, n), elems[float32](v, n), p)
	case backend.Float64:
		adamWStep(elems[float64](param, n), elems[float64](grad, n), elems[float64](m, n), elems[float64](v, n), p)
	}
	return nil
}

func adamWStep[T float](w, g, m, v []T, p backend.AdamWParams) {
	t := float64(p.Step)
	decay := 1 - p.LR*p.WeightDecay
	b1, b2 := p.Beta1, p.Beta2
	step := p.LR / (1 - math.Pow(b1, t))
	rbc2 := 1 / math.Sqrt(1-math.Pow(b2, t))
	parallelFor(len(w), optimGrain, func(lo, hi int) {
		w, g, m, v := w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
		for i, wi := range w {
			gi := float64(g[i])
			mi := b1*float64(m[i]) + (1-b1)*gi
			vi := b2*float64(v[i]) + (1-b2)*gi*gi
			m[i], v[i] = T(mi), T(vi)
			w[i] = T(float64(wi)*decay - step*mi/(math.Sqrt(vi)*rbc2+p.Eps))
		}
	})
}

// optimArgs checks the parameter and gradient of an optimizer update.
func optimArgs(kernel string, param, grad backend.View) error {
	if err := backend.CheckFloat(kernel, param.DType); err != nil {
		return err
	}
	if err := backend.CheckDense(kernel, nil, "param", param, param.DType, nil); err != nil {
		return err
	}
	return backend.CheckDense(kernel, nil, "grad", grad, param.DType, param.Shape)
}
