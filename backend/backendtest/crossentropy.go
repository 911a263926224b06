package backendtest

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

func init() { register("CrossEntropy", checkCrossEntropy) }

// refSmoothedTarget is q = (1−ε)·onehot(t) + ε/C.
func refSmoothedTarget(t, classes int, eps float64) []float64 {
	q := make([]float64, classes)
	for c := range q {
		q[c] = eps / float64(classes)
	}
	q[t] += 1 - eps
	return q
}

// refCrossEntropy returns the per-row loss −Σ_c q_c·log softmax(x)_c and
// dlogits = dloss·(softmax(x) − q), with ignored rows zero.
func refCrossEntropy(x []float64, tgt []int, dloss []float64, classes int, p backend.CrossEntropyParams) (loss, dx []float64) {
	loss = make([]float64, len(tgt))
	dx = make([]float64, len(x))
	shape := backend.Shape{len(tgt), classes}
	logp := refSoftmax(x, shape, 1, true)
	for n, t := range tgt {
		if int64(t) == p.IgnoreIndex {
			continue
		}
		q := refSmoothedTarget(t, classes, p.LabelSmoothing)
		for c := range classes {
			i := n*classes + c
			if q[c] != 0 {
				loss[n] -= q[c] * logp[i]
			}
			dx[i] = dloss[n] * (math.Exp(logp[i]) - q[c])
		}
	}
	return loss, dx
}

func checkCrossEntropy(e *Env) {
	cases := []struct {
		n, classes int
		lo, hi     float64
	}{
		{0, 5, -3, 3},
		{1, 1, -3, 3},
		{1, 7, -3, 3},
		{7, 3, -3, 3},
		{33, 10, -5, 5},
		{65, 1001, -8, 8},
		{9, 6, -2000, 2000},
		{5, 13, 1e4, 1e4 + 30},
	}
	params := []backend.CrossEntropyParams{
		{IgnoreIndex: -100},
		{IgnoreIndex: -100, LabelSmoothing: 0.1},
		{IgnoreIndex: 0, LabelSmoothing: 0.25},
		{IgnoreIndex: 2},
	}
	for _, dt := range FloatTypes {
		for _, tt := range []backend.DType{backend.Int32, backend.Int64} {
			for _, c := range cases {
				for _, p := range params {
					name := fmt.Sprintf("%v[%d %d]/%v/eps=%g/ignore=%d/range=[%g,%g)", dt, c.n, c.classes, tt, p.LabelSmoothing, p.IgnoreIndex, c.lo, c.hi)
					checkCrossEntropyCase(e, name, dt, tt, c.n, c.classes, c.lo, c.hi, p)
				}
			}
		}
	}
	checkCrossEntropyErrors(e)
}

func checkCrossEntropyCase(e *Env, name string, dt, tt backend.DType, n, classes int, lo, hi float64, p backend.CrossEntropyParams) {
	logits, xv := e.Random(dt, backend.Shape{n, classes}, false, lo, hi)
	tgt := make([]int, n)
	tv := make([]float64, n)
	for i := range tgt {
		tgt[i] = e.Rand.IntN(classes)
		if p.IgnoreIndex < 0 && e.Rand.IntN(4) == 0 {
			tgt[i] = int(p.IgnoreIndex)
		}
		tv[i] = float64(tgt[i])
	}
	target := e.Alloc(tt, backend.Shape{n})
	e.Set(target, tv)
	dloss, dlv := e.Random(dt, backend.Shape{n}, false, -2, 2)
	wantLoss, wantDx := refCrossEntropy(xv, tgt, dlv, classes, p)

	loss := e.Alloc(dt, backend.Shape{n})
	if err := e.B.CrossEntropy(loss, logits, target, p); err != nil {
		e.T.Errorf("CrossEntropy %s: %v", name, err)
		return
	}
	e.Close("CrossEntropy "+name, e.Get(loss), wantLoss, 4*Tol(dt), Tol(dt))
	dx := e.Alloc(dt, backend.Shape{n, classes})
	if err := e.B.CrossEntropyBackward(dx, logits, target, dloss, p); err != nil {
		e.T.Errorf("CrossEntropyBackward %s: %v", name, err)
		return
	}
	e.Close("CrossEntropyBackward "+name, e.Get(dx), wantDx, 4*Tol(dt), Tol(dt))
}

func checkCrossEntropyErrors(e *Env) {
	dt := backend.Float32
	logits, _ := e.Random(dt, backend.Shape{3, 4}, false, -1, 1)
	dloss, _ := e.Random(dt, backend.Shape{3}, false, -1, 1)
	p := backend.CrossEntropyParams{IgnoreIndex: -100}
	for _, bad := range []float64{4, -1, 100} {
		target := e.Alloc(backend.Int64, backend.Shape{3})
		e.Set(target, []float64{0, bad, 1})
		if err := e.B.CrossEntropy(e.Alloc(dt, backend.Shape{3}), logits, target, p); err == nil {
			e.T.Errorf("CrossEntropy with target %g of 4 classes: no error", bad)
		}
		if err := e.B.CrossEntropyBackward(e.Alloc(dt, backend.Shape{3, 4}), logits, target, dloss, p); err == nil {
			e.T.Errorf("CrossEntropyBackward with target %g of 4 classes: no error", bad)
		}
	}
	target := e.Alloc(backend.Int64, backend.Shape{2})
	e.Set(target, []float64{0, 1})
	if err := e.B.CrossEntropy(e.Alloc(dt, backend.Shape{3}), logits, target, p); err == nil {
		e.T.Errorf("CrossEntropy with 2 targets for 3 rows: no error")
	}
	ftarget, _ := e.Random(dt, backend.Shape{3}, false, 0, 3)
	if err := e.B.CrossEntropy(e.Alloc(dt, backend.Shape{3}), logits, ftarget, p); err == nil {
		e.T.Errorf("CrossEntropy with float32 targets: no error")
	}
}
