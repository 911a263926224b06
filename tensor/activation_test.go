package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

// withoutActivationGrads is the CPU backend with the activation-gradient
// kernels left out, so that tensor composes them.
type withoutActivationGrads struct{ *cpu.Backend }

func (b withoutActivationGrads) Binary(op backend.BinaryOp, dst, x, y backend.View) error {
	if op.IsActivationGrad() {
		return fmt.Errorf("test backend: %w", backend.ErrUnimplemented)
	}
	return b.Backend.Binary(op, dst, x, y)
}

// TestActivationGradFallback checks that the kernels and their
// compositions agree, also when the saved tensor broadcasts.
func TestActivationGradFallback(t *testing.T) {
	t.Parallel()
	bare := withoutActivationGrads{cpu.New()}
	cases := []struct {
		name   string
		fn     func(g, s *Tensor) *Tensor
		lo, hi float64
	}{
		{"ReLUGrad", ReLUGrad, -2, 2},
		{"GELUGrad", GELUGrad, -5, 5},
		{"GELUTanhGrad", GELUTanhGrad, -5, 5},
		{"TanhGrad", TanhGrad, -1, 1},
		{"SigmoidGrad", SigmoidGrad, 0, 1},
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range cases {
		for _, dt := range []DType{Float32, Float64} {
			for _, ss := range []Shape{{4, 7}, {1, 7}, {4, 1}} {
				g, gv := ewRand(r, dt, Shape{4, 7}, -3, 3)
				s, sv := ewRand(r, dt, ss, c.lo, c.hi)
				got := c.fn(g, s)
				gb, sb := FromSlice(gv, Shape{4, 7}, Of(dt), On(bare)), FromSlice(sv, ss, Of(dt), On(bare))
				want := c.fn(gb, sb)
				if want.Device() != Device(bare) {
					t.Fatalf("%s: composition ran on %s", c.name, want.Device().Name())
				}
				if !got.Shape().Equal(Shape{4, 7}) || !want.Shape().Equal(Shape{4, 7}) {
					t.Fatalf("%s: shapes %v and %v, want [4 7]", c.name, got.Shape(), want.Shape())
				}
				rtol := 1e-12
				if dt == Float32 {
					rtol = 1e-5
				}
				ewClose(t, fmt.Sprintf("%s %v s%v", c.name, dt, ss), got.Float64s(), want.Float64s(), rtol, rtol)
				for _, x := range []*Tensor{g, s, got, gb, sb, want} {
					x.Release()
				}
			}
		}
	}
	ewPanics(t, "ReLUGrad int64", func() {
		a := FromSlice([]int64{1, 2}, Shape{2})
		ReLUGrad(a, a)
	}, "ReLUGrad", "float")
}

// withoutFusedBN is the CPU backend seen only through backend.Backend: it
// has no fused batch norm and ReLU, so tensor composes the two.
type withoutFusedBN struct{ backend.Backend }

// TestBatchNormReLU checks the fused batch norm and ReLU against BatchNorm
// followed by ReLU (and their gradients against BatchNormBackward of the
// masked gradient), on the fused kernel and on the composition.
func TestBatchNormReLU(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(19, 20))
	shape := Shape{4, 3, 5, 5}
	for _, dt := range []DType{Float32, Float64} {
		tol := 1e-12
		if dt == Float32 {
			tol = 1e-5
		}
		for _, training := range []bool{true, false} {
			for _, dev := range []Device{cpu.New(), withoutFusedBN{cpu.New()}} {
				what := fmt.Sprintf("%v training=%v on %T", dt, training, dev)
				_, xv := ewRand(r, dt, shape, -2, 3)
				_, wv := ewRand(r, dt, Shape{3}, 0.5, 1.5)
				_, bv := ewRand(r, dt, Shape{3}, -1, 1)
				_, rmv := ewRand(r, dt, Shape{3}, -1, 1)
				_, rvv := ewRand(r, dt, Shape{3}, 0.5, 1)
				_, dyv := ewRand(r, dt, shape, -1, 1)
				on := func(v []float64, s Shape) *Tensor { return FromSlice(v, s, Of(dt), On(dev)) }
				x, w, b, dy := on(xv, shape), on(wv, Shape{3}), on(bv, Shape{3}), on(dyv, shape)
				p := NormParams{Eps: 1e-5, Momentum: 0.1, Training: training}

				rm1, rv1 := on(rmv, Shape{3}), on(rvv, Shape{3})
				y, sm, sis := BatchNormReLU(x, w, b, rm1, rv1, p)
				rm2, rv2 := on(rmv, Shape{3}), on(rvv, Shape{3})
				bn, sm2, sis2 := BatchNorm(x, w, b, rm2, rv2, p)
				want := bn.ReLU()
				ewClose(t, what+" y", y.Float64s(), want.Float64s(), tol, tol)
				ewClose(t, what+" running mean", rm1.Float64s(), rm2.Float64s(), tol, tol)
				if !training {
					// Evaluation saves no statistics; the gradient uses the
					// running ones.
					sm, sis = rm1.Clone(), rv1.AddScalar(p.Eps)
					sis2 = sis.Rsqrt()
					sis.Release()
					sis, sm2 = sis2.Clone(), sm.Clone()
				}
				dx, dw, db := BatchNormReLUBackward(dy, y, x, w, sm, sis, p)
				g := ReLUGrad(dy, want)
				wdx, wdw, wdb := BatchNormBackward(g, x, w, sm2, sis2, p)
				ewClose(t, what+" dx", dx.Float64s(), wdx.Float64s(), tol, tol)
				ewClose(t, what+" dweight", dw.Float64s(), wdw.Float64s(), tol, tol)
				ewClose(t, what+" dbias", db.Float64s(), wdb.Float64s(), tol, tol)
				for _, u := range []*Tensor{x, w, b, dy, rm1, rv1, rm2, rv2, y, sm, sis, bn, sm2, sis2, want, dx, dw, db, g, wdx, wdw, wdb} {
					u.Release()
				}
			}
		}
	}
}
