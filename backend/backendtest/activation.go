package backendtest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/flockml/flock/backend"
)

func init() {
	register("ActivationGrad", checkActivationGrad)
}

// activationGradCase is an activation's gradient op with its float64
// reference dL/dx from the output gradient g and the saved tensor s, the
// range of s, and an absolute tolerance (in units of Tol·|g|) for where the
// gradient crosses zero.
type activationGradCase struct {
	op     backend.BinaryOp
	name   string
	lo, hi float64
	atol   float64
	ref    func(g, s float64) float64
}

var activationGradCases = []activationGradCase{
	{backend.ReLUGrad, "ReLUGrad", -3, 3, 0, func(g, y float64) float64 {
		if y > 0 {
			return g
		}
		return 0
	}},
	{backend.GELUGrad, "GELUGrad", -8, 8, 0.2, func(g, x float64) float64 {
		return g * (0.5*math.Erfc(-x/math.Sqrt2) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi))
	}},
	{backend.GELUTanhGrad, "GELUTanhGrad", -8, 8, 0.2, func(g, x float64) float64 {
		k, c := math.Sqrt(2/math.Pi), 0.044715
		t := math.Tanh(k * (x + c*x*x*x))
		return g * (0.5*(1+t) + 0.5*x*(1-t*t)*k*(1+3*c*x*x))
	}},
	{backend.TanhGrad, "TanhGrad", -1, 1, 0.2, func(g, y float64) float64 { return g * (1 - y*y) }},
	{backend.SigmoidGrad, "SigmoidGrad", 0, 1, 0.2, func(g, y float64) float64 { return g * y * (1 - y) }},
}

// checkActivationGrad tests the activation-gradient ops of Binary on every
// layout, in place and broadcast. A backend may leave any of them out by
// returning ErrUnimplemented; that op's checks are then skipped.
func checkActivationGrad(e *Env) {
	for _, c := range activationGradCases {
		e.T.Run(c.name, func(t *testing.T) {
			e := &Env{T: t, B: e.B, Rand: e.Rand}
			probe := e.Alloc(backend.Float32, backend.Shape{1})
			e.Set(probe, []float64{1})
			if err := e.B.Binary(c.op, probe, probe, probe); errors.Is(err, backend.ErrUnimplemented) {
				t.Skipf("%s: %v", c.name, err)
			}
			checkActivationGradOp(e, c)
		})
	}
}

func checkActivationGradOp(e *Env, c activationGradCase) {
	inputs := func(n int) (g, s []float64) {
		g, s = make([]float64, n), make([]float64, n)
		for i := range g {
			g[i] = -5 + 10*e.Rand.Float64()
			s[i] = c.lo + (c.hi-c.lo)*e.Rand.Float64()
		}
		return g, s
	}
	for _, dt := range FloatTypes {
		rtol, atol := Tol(dt)*4, Tol(dt)*c.atol*5
		ref := func(g, s []float64) []float64 {
			want := make([]float64, len(g))
			for i := range g {
				want[i] = Round(dt, c.ref(Round(dt, g[i]), Round(dt, s[i])))
			}
			return want
		}
		for _, sh := range Shapes {
			if skipLarge(sh, dt) {
				continue
			}
			for _, strided := range []bool{false, true} {
				what := fmt.Sprintf("%s %v%v strided=%v", c.name, dt, sh, strided)
				gv, sv := inputs(sh.NumElements())
				g, s := e.alloc2(dt, sh, strided, gv, sv)
				gv, sv = e.Get(g), e.Get(s)
				dst := e.Alloc(dt, sh)
				if err := e.B.Binary(c.op, dst, g, s); err != nil {
					e.T.Fatalf("%s: %v", what, err)
				}
				want := ref(gv, sv)
				e.Close(what, e.Get(dst), want, rtol, atol)
				if err := e.B.Binary(c.op, g, g, s); err != nil {
					e.T.Fatalf("%s into g: %v", what, err)
				}
				e.Close(what+" into g", e.Get(g), want, rtol, atol)
				e.Set(g, gv)
				if err := e.B.Binary(c.op, s, g, s); err != nil {
					e.T.Fatalf("%s into s: %v", what, err)
				}
				e.Close(what+" into s", e.Get(s), want, rtol, atol)
			}
		}
		// A broadcast saved tensor, as when one value gates a row.
		for _, bc := range broadcastCases {
			if skipLarge(bc.full, dt) {
				continue
			}
			gv, _ := inputs(bc.full.NumElements())
			_, sv := inputs(bc.small.NumElements())
			g := e.Alloc(dt, bc.full)
			e.Set(g, gv)
			s := e.Strided(dt, bc.small)
			e.Set(s, sv)
			dst := e.Alloc(dt, bc.full)
			what := fmt.Sprintf("%s %v %v with %v", c.name, dt, bc.full, bc.small)
			if err := e.B.Binary(c.op, dst, g, broadcast(s, bc.full)); err != nil {
				e.T.Fatalf("%s: %v", what, err)
			}
			e.Close(what, e.Get(dst), ref(e.Get(g), broadcastVals(e.Get(s), bc.small, bc.full)), rtol, atol)
		}
	}
	// Integer operands are an error.
	if err := e.B.Binary(c.op, e.Alloc(backend.Int32, backend.Shape{2}), e.Alloc(backend.Int32, backend.Shape{2}), e.Alloc(backend.Int32, backend.Shape{2})); err == nil {
		e.T.Errorf("%s on int32: no error", c.name)
	}
	if c.op != backend.ReLUGrad {
		return
	}
	// ReLUGrad selects: a NaN or infinite gradient passes where the saved
	// value is positive and is dropped elsewhere (NaN is not positive).
	for _, dt := range FloatTypes {
		nan, inf := math.NaN(), math.Inf(1)
		gv := []float64{nan, nan, inf, -inf, 1, 2, 3, -4}
		sv := []float64{1, -1, 0, 2, nan, inf, -inf, math.Copysign(0, -1)}
		g, s := e.alloc2(dt, backend.Shape{len(gv)}, false, gv, sv)
		dst := e.Alloc(dt, g.Shape)
		if err := e.B.Binary(c.op, dst, g, s); err != nil {
			e.T.Fatalf("ReLUGrad special: %v", err)
		}
		e.Close(fmt.Sprintf("ReLUGrad %v of NaN/Inf", dt), e.Get(dst), []float64{nan, 0, 0, -inf, 0, 2, 0, 0}, 0, 0)
	}
}
