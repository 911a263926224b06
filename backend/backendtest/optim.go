package backendtest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/flockml/flock/backend"
)

func init() {
	register("FusedOptim", checkFusedOptim)
}

// checkFusedOptim tests the optional fused optimizer updates against a
// float64 transcription of torch.optim's formulas, over several steps. A
// backend without them (no FusedSGD or FusedAdamW, or ErrUnimplemented)
// skips the check.
func checkFusedOptim(e *Env) {
	e.T.Run("SGD", func(t *testing.T) {
		f, ok := e.B.(backend.FusedSGD)
		if !ok {
			t.Skip("backend has no fused SGD")
		}
		checkFusedSGD(&Env{T: t, B: e.B, Rand: e.Rand}, f)
	})
	e.T.Run("AdamW", func(t *testing.T) {
		f, ok := e.B.(backend.FusedAdamW)
		if !ok {
			t.Skip("backend has no fused AdamW")
		}
		checkFusedAdamW(&Env{T: t, B: e.B, Rand: e.Rand}, f)
	})
}

const optimSteps = 3

// optimShapes include one large enough to be split between threads.
var optimShapes = []backend.Shape{{0}, {1}, {7}, {33, 65}, {300, 257}}

// randVals returns n values uniform in [lo, hi) rounded to dt.
func (e *Env) randVals(dt backend.DType, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = Round(dt, lo+(hi-lo)*e.Rand.Float64())
	}
	return v
}

func checkFusedSGD(e *Env, f backend.FusedSGD) {
	settings := []backend.SGDParams{
		{LR: 0.1},
		{LR: 0.05, WeightDecay: 0.01},
		{LR: 0.1, Momentum: 0.9},
		{LR: 0.1, Momentum: 0.9, Dampening: 0.3, WeightDecay: 1e-3},
		{LR: 0.02, Momentum: 0.8, Nesterov: true, WeightDecay: 5e-4},
	}
	for _, dt := range FloatTypes {
		for _, s := range optimShapes {
			if skipLarge(s, dt) {
				continue
			}
			for _, p := range settings {
				n := s.NumElements()
				w := e.randVals(dt, n, -1, 1)
				pv := e.Alloc(dt, s)
				e.Set(pv, w)
				gv := e.Alloc(dt, s)
				var bv backend.View
				var b []float64
				if p.Momentum != 0 {
					bv = e.Alloc(dt, s)
				}
				what := fmt.Sprintf("SGDStep %v%v %+v", dt, s, p)
				for step := range optimSteps {
					g := e.randVals(dt, n, -1, 1)
					e.Set(gv, g)
					q := p
					q.First = step == 0
					err := f.SGDStep(pv, gv, bv, q)
					if errors.Is(err, backend.ErrUnimplemented) {
						e.T.Skipf("%s: %v", what, err)
					}
					if err != nil {
						e.T.Fatalf("%s: %v", what, err)
					}
					// The reference, rounded as the backend stores.
					if b == nil {
						b = make([]float64, n)
					}
					for i := range w {
						d := g[i] + p.WeightDecay*w[i]
						if p.Momentum != 0 {
							if q.First {
								b[i] = d
							} else {
								b[i] = p.Momentum*b[i] + (1-p.Dampening)*d
							}
							bi := b[i]
							b[i] = Round(dt, b[i])
							if p.Nesterov {
								d += p.Momentum * bi
							} else {
								d = bi
							}
						}
						w[i] = Round(dt, w[i]-p.LR*d)
					}
					tol := Tol(dt)
					e.Close(fmt.Sprintf("%s step %d param", what, step), e.Get(pv), w, tol, tol*1e-2)
					if p.Momentum != 0 {
						e.Close(fmt.Sprintf("%s step %d buffer", what, step), e.Get(bv), b, tol, tol*1e-2)
					}
					if got := e.Get(gv); !equalVals(got, g) {
						e.T.Fatalf("%s: the gradient was written", what)
					}
				}
			}
		}
	}
	s := backend.Shape{4}
	if err := f.SGDStep(e.Alloc(backend.Float32, s), e.Alloc(backend.Float32, backend.Shape{5}), backend.View{}, backend.SGDParams{LR: 1}); err == nil {
		e.T.Errorf("SGDStep with a gradient of another shape: no error")
	}
	if err := f.SGDStep(e.Alloc(backend.Float32, s), e.Alloc(backend.Float32, s), backend.View{}, backend.SGDParams{LR: 1, Momentum: 0.9}); err == nil {
		e.T.Errorf("SGDStep with momentum and no buffer: no error")
	}
}

func checkFusedAdamW(e *Env, f backend.FusedAdamW) {
	settings := []backend.AdamWParams{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2},
		{LR: 0.1, Beta1: 0.5, Beta2: 0.9, Eps: 1e-3},
	}
	for _, dt := range FloatTypes {
		for _, s := range optimShapes {
			if skipLarge(s, dt) {
				continue
			}
			for _, p := range settings {
				n := s.NumElements()
				w := e.randVals(dt, n, -1, 1)
				m, v := make([]float64, n), make([]float64, n)
				pv, gv, mv, vv := e.Alloc(dt, s), e.Alloc(dt, s), e.Alloc(dt, s), e.Alloc(dt, s)
				e.Set(pv, w)
				e.Set(mv, m)
				e.Set(vv, v)
				what := fmt.Sprintf("AdamWStep %v%v %+v", dt, s, p)
				for step := 1; step <= optimSteps; step++ {
					g := e.randVals(dt, n, -1, 1)
					e.Set(gv, g)
					q := p
					q.Step = step
					err := f.AdamWStep(pv, gv, mv, vv, q)
					if errors.Is(err, backend.ErrUnimplemented) {
						e.T.Skipf("%s: %v", what, err)
					}
					if err != nil {
						e.T.Fatalf("%s: %v", what, err)
					}
					bc1 := 1 - math.Pow(p.Beta1, float64(step))
					bc2 := 1 - math.Pow(p.Beta2, float64(step))
					for i := range w {
						mi := p.Beta1*m[i] + (1-p.Beta1)*g[i]
						vi := p.Beta2*v[i] + (1-p.Beta2)*g[i]*g[i]
						m[i], v[i] = Round(dt, mi), Round(dt, vi)
						w[i] = Round(dt, w[i]*(1-p.LR*p.WeightDecay)-p.LR/bc1*mi/(math.Sqrt(vi)/math.Sqrt(bc2)+p.Eps))
					}
					tol := Tol(dt)
					e.Close(fmt.Sprintf("%s step %d param", what, step), e.Get(pv), w, tol, tol*1e-2)
					e.Close(fmt.Sprintf("%s step %d m", what, step), e.Get(mv), m, tol, tol*1e-2)
					e.Close(fmt.Sprintf("%s step %d v", what, step), e.Get(vv), v, tol, tol*1e-2)
				}
			}
		}
	}
	s := backend.Shape{4}
	if err := f.AdamWStep(e.Alloc(backend.Float32, s), e.Alloc(backend.Float32, s), e.Alloc(backend.Float32, s), e.Alloc(backend.Float32, s), backend.AdamWParams{LR: 1, Beta1: 0.9, Beta2: 0.99}); err == nil {
		e.T.Errorf("AdamWStep at step 0: no error")
	}
}

func equalVals(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}
