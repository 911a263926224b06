package backendtest

import (
	"errors"
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

func init() { register("BatchNormReLU", checkBatchNormReLU) }

// checkBatchNormReLU tests the optional fused batch normalisation and ReLU
// against the float64 reference of the two in turn; a backend without it
// (no FusedBatchNormReLU, or ErrUnimplemented) skips the check.
func checkBatchNormReLU(e *Env) {
	f, ok := e.B.(backend.FusedBatchNormReLU)
	if !ok {
		e.T.Skip("backend has no fused batch norm and ReLU")
	}
	shapes := []backend.Shape{{2, 3}, {4, 3, 5}, {3, 2, 4, 5}, {8, 16, 9, 9}, {2, 3, 0}}
	for _, dt := range FloatTypes {
		for _, shape := range shapes {
			for _, training := range []bool{true, false} {
				for _, affine := range []bool{true, false} {
					name := fmt.Sprintf("%v%v/training=%v/affine=%v", dt, shape, training, affine)
					if !checkBatchNormReLUCase(e, f, name, dt, shape, training, affine) {
						return
					}
				}
			}
		}
	}
	// A missing y is an error.
	x := e.Alloc(backend.Float32, backend.Shape{2, 3})
	v := e.Alloc(backend.Float32, backend.Shape{3})
	if err := f.BatchNormReLUBackward(e.Alloc(backend.Float32, x.Shape), backend.View{}, backend.View{}, x, backend.View{}, x, backend.View{}, v, v, backend.NormParams{Training: true}); err == nil {
		e.T.Errorf("BatchNormReLUBackward without y: no error")
	}
}

// checkBatchNormReLUCase runs one case and reports false when the backend
// leaves the kernels out.
func checkBatchNormReLUCase(e *Env, f backend.FusedBatchNormReLU, name string, dt backend.DType, shape backend.Shape, training, affine bool) bool {
	_, ch, _ := bnGeometry(shape)
	p := backend.NormParams{Eps: 1e-5, Momentum: 0.1, Training: training}
	const lo, hi = -2.0, 3.0
	atol := normAtol(dt, lo, hi)
	x, xv := e.Random(dt, shape, false, lo, hi)
	var wv, bv []float64
	if affine {
		_, wv = e.Random(dt, backend.Shape{ch}, false, 0.5, 1.5)
		_, bv = e.Random(dt, backend.Shape{ch}, false, -1, 1)
	}
	_, rmv := e.Random(dt, backend.Shape{ch}, false, lo, hi)
	_, rvv := e.Random(dt, backend.Shape{ch}, false, 0.05, 1)
	w, b, rm, rv := e.optionalVec(dt, wv), e.optionalVec(dt, bv), e.optionalVec(dt, rmv), e.optionalVec(dt, rvv)
	y := e.Alloc(dt, shape)
	sm, sis := e.Alloc(dt, backend.Shape{ch}), e.Alloc(dt, backend.Shape{ch})
	err := f.BatchNormReLU(y, sm, sis, x, w, b, rm, rv, p)
	if errors.Is(err, backend.ErrUnimplemented) {
		e.T.Skipf("BatchNormReLU %s: %v", name, err)
		return false
	}
	if err != nil {
		e.T.Errorf("BatchNormReLU %s: %v", name, err)
		return true
	}
	mean, variance := rmv, rvv
	if training {
		mean, variance, _ = refBNStats(xv, shape)
	}
	want := refBNApply(xv, shape, mean, variance, wv, bv, p.Eps)
	for i, v := range want {
		want[i] = math.Max(v, 0)
	}
	e.Close("BatchNormReLU "+name, e.Get(y), want, 4*Tol(dt), atol)
	if shape.NumElements() == 0 {
		return true
	}

	// Backward: the gradient of BatchNorm of dy masked by the output the
	// backend wrote.
	smv, sisv := make([]float64, ch), make([]float64, ch)
	for c := range ch {
		smv[c] = Round(dt, mean[c])
		sisv[c] = Round(dt, 1/math.Sqrt(variance[c]+p.Eps))
	}
	e.Set(sm, smv)
	e.Set(sis, sisv)
	dy, dyv := e.Random(dt, shape, false, -1, 1)
	yv := e.Get(y)
	masked := make([]float64, len(dyv))
	for i := range dyv {
		if yv[i] > 0 {
			masked[i] = dyv[i]
		}
	}
	wantDx, wantDw, wantDb := refBNGrad(masked, xv, shape, wv, smv, sisv, training)
	dx := e.Alloc(dt, shape)
	var dw, db backend.View
	if affine {
		dw, db = e.Alloc(dt, backend.Shape{ch}), e.Alloc(dt, backend.Shape{ch})
	}
	if err := f.BatchNormReLUBackward(dx, dw, db, dy, y, x, w, sm, sis, p); err != nil {
		e.T.Errorf("BatchNormReLUBackward %s: %v", name, err)
		return true
	}
	gtol := Tol(dt) * 10
	e.Close("BatchNormReLUBackward dx "+name, e.Get(dx), wantDx, gtol, gtol)
	if affine {
		e.Close("BatchNormReLUBackward dweight "+name, e.Get(dw), wantDw, gtol, gtol)
		e.Close("BatchNormReLUBackward dbias "+name, e.Get(db), wantDb, gtol, gtol)
	}
	return true
}
