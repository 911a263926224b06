package backendtest

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

func init() { register("Norm", checkNorm) }

func checkNorm(e *Env) {
	checkBatchNorm(e)
	checkLayerNorm(e)
	checkNormErrors(e)
}

// bnGeometry returns N, C and the positions per sample and channel of
// [N, C, ...].
func bnGeometry(shape backend.Shape) (n, c, sp int) {
	return shape[0], shape[1], shape[2:].NumElements()
}

// refBNStats returns the per-channel batch mean and the biased and unbiased
// variances, each from its definition.
func refBNStats(x []float64, shape backend.Shape) (mean, biased, unbiased []float64) {
	n, ch, sp := bnGeometry(shape)
	m := float64(n * sp)
	mean, biased, unbiased = make([]float64, ch), make([]float64, ch), make([]float64, ch)
	for c := range ch {
		for i := range n {
			for s := range sp {
				mean[c] += x[(i*ch+c)*sp+s] / m
			}
		}
		ss := 0.0
		for i := range n {
			for s := range sp {
				d := x[(i*ch+c)*sp+s] - mean[c]
				ss += d * d
			}
		}
		biased[c], unbiased[c] = ss/m, ss/(m-1)
	}
	return mean, biased, unbiased
}

// refBNApply is y = γ·(x − μ)/√(σ² + eps) + β per channel (γ = 1, β = 0
// when w or b is nil).
func refBNApply(x []float64, shape backend.Shape, mean, variance, w, b []float64, eps float64) []float64 {
	n, ch, sp := bnGeometry(shape)
	y := make([]float64, len(x))
	for i := range n {
		for c := range ch {
			for s := range sp {
				at := (i*ch+c)*sp + s
				v := (x[at] - mean[c]) / math.Sqrt(variance[c]+eps)
				if w != nil {
					v *= w[c]
				}
				if b != nil {
					v += b[c]
				}
				y[at] = v
			}
		}
	}
	return y
}

// refBNGrad follows the chain rule of Ioffe & Szegedy (2015, §3) through
// x̂ = (x − μ)·s, s = (σ² + eps)^{-1/2}, with μ and s the given statistics:
//
//	∂L/∂x̂ = dy·γ,  ∂L/∂σ² = Σ ∂L/∂x̂·(x − μ)·(−s³/2),  ∂L/∂μ = −s·Σ ∂L/∂x̂,
//	∂L/∂x = ∂L/∂x̂·s + ∂L/∂σ²·2(x − μ)/M + ∂L/∂μ/M
//
// (the term of ∂L/∂μ through σ² vanishes because Σ(x − μ) = 0 for the batch
// mean). Without training μ and s are constants and ∂L/∂x = ∂L/∂x̂·s.
func refBNGrad(dy, x []float64, shape backend.Shape, w, mean, invstd []float64, training bool) (dx, dw, db []float64) {
	n, ch, sp := bnGeometry(shape)
	m := float64(n * sp)
	dx, dw, db = make([]float64, len(x)), make([]float64, ch), make([]float64, ch)
	for c := range ch {
		g := 1.0
		if w != nil {
			g = w[c]
		}
		s := invstd[c]
		dvar, dmean := 0.0, 0.0
		for i := range n {
			for k := range sp {
				at := (i*ch+c)*sp + k
				dxh := dy[at] * g
				dvar += dxh * (x[at] - mean[c]) * -0.5 * s * s * s
				dmean -= dxh * s
				dw[c] += dy[at] * (x[at] - mean[c]) * s
				db[c] += dy[at]
			}
		}
		for i := range n {
			for k := range sp {
				at := (i*ch+c)*sp + k
				dx[at] = dy[at] * g * s
				if training {
					dx[at] += dvar*2*(x[at]-mean[c])/m + dmean/m
				}
			}
		}
	}
	return dx, dw, db
}

// centralDiff returns the central-difference gradient of f at x.
func centralDiff(f func([]float64) float64, x []float64) []float64 {
	const h = 1e-6
	g := make([]float64, len(x))
	for i := range x {
		old := x[i]
		x[i] = old + h
		fp := f(x)
		x[i] = old - h
		fm := f(x)
		x[i] = old
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

// normAtol is the absolute tolerance for normalised values of data in
// [lo, hi): the rounding of dt plus float64 rounding amplified by the
// conditioning of x − μ, |x|/(hi − lo).
func normAtol(dt backend.DType, lo, hi float64) float64 {
	return Tol(dt) + 1e-14*max(math.Abs(lo), math.Abs(hi))/(hi-lo)
}

func dotProduct(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func roundAll(dt backend.DType, v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = Round(dt, x)
	}
	return out
}

// optionalVec returns a [n] view holding vals, or the zero View when vals is nil.
func (e *Env) optionalVec(dt backend.DType, vals []float64) backend.View {
	if vals == nil {
		return backend.View{}
	}
	v := e.Alloc(dt, backend.Shape{len(vals)})
	e.Set(v, vals)
	return v
}

func checkBatchNorm(e *Env) {
	shapes := []struct {
		shape  backend.Shape
		lo, hi float64
	}{
		{backend.Shape{0, 3}, -1, 1},
		{backend.Shape{2, 3, 0}, -1, 1},
		{backend.Shape{2, 3}, -1, 1},
		{backend.Shape{4, 3, 5}, -2, 3},
		{backend.Shape{1, 4, 3, 3}, -2, 3},
		{backend.Shape{5, 1, 7}, -2, 3},
		{backend.Shape{3, 2, 4, 5}, -2, 3},
		{backend.Shape{3, 5, 4, 7}, 100, 101},
		{backend.Shape{8, 16, 9, 9}, -2, 3},
		// Many values per channel: a CPU backend may take the channels in
		// blocks, the last one short.
		{backend.Shape{3, 70, 20, 35}, -2, 3},
	}
	modes := []struct {
		training, affine, running bool
	}{
		{true, true, true},
		{true, false, false},
		{true, true, false},
		{false, true, true},
		{false, false, true},
	}
	for _, dt := range FloatTypes {
		for _, s := range shapes {
			for _, md := range modes {
				name := fmt.Sprintf("%v%v/range=[%g,%g)/training=%v/affine=%v/running=%v", dt, s.shape, s.lo, s.hi, md.training, md.affine, md.running)
				checkBatchNormCase(e, name, dt, s.shape, s.lo, s.hi, md.training, md.affine, md.running)
			}
		}
	}
}

func checkBatchNormCase(e *Env, name string, dt backend.DType, shape backend.Shape, lo, hi float64, training, affine, running bool) {
	_, ch, _ := bnGeometry(shape)
	empty := shape.NumElements() == 0
	atol := normAtol(dt, lo, hi)
	p := backend.NormParams{Eps: 1e-5, Momentum: 0.1, Training: training}
	x, xv := e.Random(dt, shape, false, lo, hi)
	var wv, bv, rmv, rvv []float64
	if affine {
		_, wv = e.Random(dt, backend.Shape{ch}, false, 0.5, 1.5)
		_, bv = e.Random(dt, backend.Shape{ch}, false, -1, 1)
	}
	if running {
		_, rmv = e.Random(dt, backend.Shape{ch}, false, lo, hi)
		_, rvv = e.Random(dt, backend.Shape{ch}, false, 0.05, 1)
	}
	w, b, rm, rv := e.optionalVec(dt, wv), e.optionalVec(dt, bv), e.optionalVec(dt, rmv), e.optionalVec(dt, rvv)
	y := e.Alloc(dt, shape)
	sm, sis := e.Alloc(dt, backend.Shape{ch}), e.Alloc(dt, backend.Shape{ch})
	if err := e.B.BatchNorm(y, sm, sis, x, w, b, rm, rv, p); err != nil {
		e.T.Errorf("BatchNorm %s: %v", name, err)
		return
	}

	var mean, variance []float64
	if training {
		var unbiased []float64
		mean, variance, unbiased = refBNStats(xv, shape)
		if running {
			wantRm, wantRv := make([]float64, ch), make([]float64, ch)
			for c := range ch {
				wantRm[c] = (1-p.Momentum)*rmv[c] + p.Momentum*mean[c]
				wantRv[c] = (1-p.Momentum)*rvv[c] + p.Momentum*unbiased[c]
			}
			if empty {
				wantRm, wantRv = rmv, rvv
			}
			e.Close("BatchNorm running mean "+name, e.Get(rm), wantRm, 4*Tol(dt), atol)
			e.Close("BatchNorm running var "+name, e.Get(rv), wantRv, 4*Tol(dt), atol)
		}
		if !empty {
			invstd := make([]float64, ch)
			for c := range ch {
				invstd[c] = 1 / math.Sqrt(variance[c]+p.Eps)
			}
			e.Close("BatchNorm save mean "+name, e.Get(sm), mean, 4*Tol(dt), atol)
			e.Close("BatchNorm save invstd "+name, e.Get(sis), invstd, 4*Tol(dt), atol)
		}
	} else {
		mean, variance = rmv, rvv
		e.Close("BatchNorm running mean unchanged "+name, e.Get(rm), rmv, 0, 0)
		e.Close("BatchNorm running var unchanged "+name, e.Get(rv), rvv, 0, 0)
	}
	e.Close("BatchNorm "+name, e.Get(y), refBNApply(xv, shape, mean, variance, wv, bv, p.Eps), 4*Tol(dt), atol)
	if empty || !training {
		return
	}

	// Backward, from statistics rounded to dt as a forward pass would save them.
	smv := roundAll(dt, mean)
	sisv := make([]float64, ch)
	for c := range ch {
		sisv[c] = Round(dt, 1/math.Sqrt(variance[c]+p.Eps))
	}
	dy, dyv := e.Random(dt, shape, false, -1, 1)
	dx := e.Alloc(dt, shape)
	var dw, db backend.View
	if affine {
		dw, db = e.Alloc(dt, backend.Shape{ch}), e.Alloc(dt, backend.Shape{ch})
	}
	if err := e.B.BatchNormBackward(dx, dw, db, dy, x, w, e.optionalVec(dt, smv), e.optionalVec(dt, sisv), p); err != nil {
		e.T.Errorf("BatchNormBackward %s: %v", name, err)
		return
	}
	wantDx, wantDw, wantDb := refBNGrad(dyv, xv, shape, wv, smv, sisv, training)
	e.Close("BatchNormBackward dx "+name, e.Get(dx), wantDx, 4*Tol(dt), atol)
	if affine {
		e.Close("BatchNormBackward dweight "+name, e.Get(dw), wantDw, 4*Tol(dt), atol)
		e.Close("BatchNormBackward dbias "+name, e.Get(db), wantDb, 4*Tol(dt), atol)
	}
	if dt != backend.Float64 || len(xv) > 200 {
		return
	}
	// The gradient of L = Σ dy·y by central differences of the reference
	// forward pass with batch statistics.
	loss := func(xs, ws, bs []float64) float64 {
		mu, v, _ := refBNStats(xs, shape)
		return dotProduct(dyv, refBNApply(xs, shape, mu, v, ws, bs, p.Eps))
	}
	e.Close("BatchNormBackward dx vs differences "+name, e.Get(dx),
		centralDiff(func(xs []float64) float64 { return loss(xs, wv, bv) }, append([]float64(nil), xv...)), 1e-5, 1e-6)
	if affine {
		e.Close("BatchNormBackward dweight vs differences "+name, e.Get(dw),
			centralDiff(func(ws []float64) float64 { return loss(xv, ws, bv) }, append([]float64(nil), wv...)), 1e-5, 1e-6)
		e.Close("BatchNormBackward dbias vs differences "+name, e.Get(db),
			centralDiff(func(bs []float64) float64 { return loss(xv, wv, bs) }, append([]float64(nil), bv...)), 1e-5, 1e-6)
	}
}

// refLayerNorm normalises each group of the last d values by its mean and
// biased variance.
func refLayerNorm(x, w, b []float64, d int, eps float64) (y, mean, rstd []float64) {
	rows := len(x) / d
	y, mean, rstd = make([]float64, len(x)), make([]float64, rows), make([]float64, rows)
	for r := range rows {
		g := x[r*d : (r+1)*d]
		for _, v := range g {
			mean[r] += v / float64(d)
		}
		variance := 0.0
		for _, v := range g {
			variance += (v - mean[r]) * (v - mean[r]) / float64(d)
		}
		rstd[r] = 1 / math.Sqrt(variance+eps)
		for j, v := range g {
			o := (v - mean[r]) * rstd[r]
			if w != nil {
				o = o*w[j] + b[j]
			}
			y[r*d+j] = o
		}
	}
	return y, mean, rstd
}

// refLayerNormGrad is the chain rule through x̂ = (x − μ)·r per group, as in
// refBNGrad with the group in place of the channel.
func refLayerNormGrad(dy, x, w, mean, rstd []float64, d int) (dx, dw, db []float64) {
	rows := len(x) / d
	dx, dw, db = make([]float64, len(x)), make([]float64, d), make([]float64, d)
	for r := range rows {
		s := rstd[r]
		dvar, dmean := 0.0, 0.0
		for j := range d {
			at := r*d + j
			dxh := dy[at]
			if w != nil {
				dxh *= w[j]
			}
			dvar += dxh * (x[at] - mean[r]) * -0.5 * s * s * s
			dmean -= dxh * s
			dw[j] += dy[at] * (x[at] - mean[r]) * s
			db[j] += dy[at]
		}
		for j := range d {
			at := r*d + j
			dxh := dy[at]
			if w != nil {
				dxh *= w[j]
			}
			dx[at] = dxh*s + dvar*2*(x[at]-mean[r])/float64(d) + dmean/float64(d)
		}
	}
	return dx, dw, db
}

func checkLayerNorm(e *Env) {
	cases := []struct {
		shape  backend.Shape
		d      int
		lo, hi float64
	}{
		{backend.Shape{0, 4}, 4, -1, 1},
		{backend.Shape{1, 1}, 1, -1, 1},
		{backend.Shape{3, 7}, 7, -2, 3},
		{backend.Shape{2, 3, 4}, 12, -2, 3},
		{backend.Shape{2, 3, 4}, 4, -2, 3},
		{backend.Shape{5, 1, 6}, 6, -2, 3},
		{backend.Shape{2, 9, 33}, 33, 1000, 1001},
		{backend.Shape{130, 257}, 257, -2, 3},
	}
	const eps = 1e-5
	for _, dt := range FloatTypes {
		for _, c := range cases {
			for _, affine := range []bool{true, false} {
				name := fmt.Sprintf("%v%v/d=%d/range=[%g,%g)/affine=%v", dt, c.shape, c.d, c.lo, c.hi, affine)
				rows := c.shape.NumElements() / c.d
				atol := normAtol(dt, c.lo, c.hi)
				x, xv := e.Random(dt, c.shape, false, c.lo, c.hi)
				var wv, bv []float64
				if affine {
					_, wv = e.Random(dt, backend.Shape{c.d}, false, 0.5, 1.5)
					_, bv = e.Random(dt, backend.Shape{c.d}, false, -1, 1)
				}
				w, b := e.optionalVec(dt, wv), e.optionalVec(dt, bv)
				y, mean, rstd := e.Alloc(dt, c.shape), e.Alloc(dt, backend.Shape{rows}), e.Alloc(dt, backend.Shape{rows})
				if err := e.B.LayerNorm(y, mean, rstd, x, w, b, c.d, eps); err != nil {
					e.T.Errorf("LayerNorm %s: %v", name, err)
					continue
				}
				wantY, wantMean, wantRstd := refLayerNorm(xv, wv, bv, c.d, eps)
				e.Close("LayerNorm "+name, e.Get(y), wantY, 4*Tol(dt), atol)
				e.Close("LayerNorm mean "+name, e.Get(mean), wantMean, 4*Tol(dt), atol)
				e.Close("LayerNorm rstd "+name, e.Get(rstd), wantRstd, 4*Tol(dt), atol)

				mv, rv := roundAll(dt, wantMean), roundAll(dt, wantRstd)
				dy, dyv := e.Random(dt, c.shape, false, -1, 1)
				dx := e.Alloc(dt, c.shape)
				var dw, db backend.View
				if affine {
					dw, db = e.Alloc(dt, backend.Shape{c.d}), e.Alloc(dt, backend.Shape{c.d})
				}
				if err := e.B.LayerNormBackward(dx, dw, db, dy, x, w, e.optionalVec(dt, mv), e.optionalVec(dt, rv), c.d); err != nil {
					e.T.Errorf("LayerNormBackward %s: %v", name, err)
					continue
				}
				wantDx, wantDw, wantDb := refLayerNormGrad(dyv, xv, wv, mv, rv, c.d)
				e.Close("LayerNormBackward dx "+name, e.Get(dx), wantDx, 4*Tol(dt), atol)
				if affine {
					e.Close("LayerNormBackward dweight "+name, e.Get(dw), wantDw, 4*Tol(dt), atol)
					e.Close("LayerNormBackward dbias "+name, e.Get(db), wantDb, 4*Tol(dt), atol)
				}
				if dt != backend.Float64 || len(xv) > 200 || len(xv) == 0 {
					continue
				}
				loss := func(xs, ws, bs []float64) float64 {
					ys, _, _ := refLayerNorm(xs, ws, bs, c.d, eps)
					return dotProduct(dyv, ys)
				}
				e.Close("LayerNormBackward dx vs differences "+name, e.Get(dx),
					centralDiff(func(xs []float64) float64 { return loss(xs, wv, bv) }, append([]float64(nil), xv...)), 1e-5, 1e-6)
				if affine {
					e.Close("LayerNormBackward dweight vs differences "+name, e.Get(dw),
						centralDiff(func(ws []float64) float64 { return loss(xv, ws, bv) }, append([]float64(nil), wv...)), 1e-5, 1e-6)
				}
			}
		}
	}
}

func checkNormErrors(e *Env) {
	dt := backend.Float32
	p := backend.NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
	x, _ := e.Random(dt, backend.Shape{4, 3, 2}, false, -1, 1)
	c3 := func() backend.View { return e.Alloc(dt, backend.Shape{3}) }
	if err := e.B.BatchNorm(e.Alloc(dt, backend.Shape{4, 3, 2}), c3(), c3(), x, e.Alloc(dt, backend.Shape{4}), backend.View{}, backend.View{}, backend.View{}, p); err == nil {
		e.T.Errorf("BatchNorm with weight [4] for 3 channels: no error")
	}
	if err := e.B.BatchNorm(e.Alloc(dt, backend.Shape{4, 3, 2}), c3(), c3(), x, backend.View{}, backend.View{}, backend.View{}, backend.View{}, backend.NormParams{Eps: 1e-5}); err == nil {
		e.T.Errorf("BatchNorm in evaluation without running statistics: no error")
	}
	if err := e.B.BatchNorm(e.Alloc(dt, backend.Shape{4, 3, 3}), c3(), c3(), x, backend.View{}, backend.View{}, backend.View{}, backend.View{}, p); err == nil {
		e.T.Errorf("BatchNorm into y [4 3 3] from x [4 3 2]: no error")
	}
	if err := e.B.LayerNorm(e.Alloc(dt, backend.Shape{4, 3, 2}), backend.View{}, backend.View{}, x, backend.View{}, backend.View{}, 4, 1e-5); err == nil {
		e.T.Errorf("LayerNorm of [4 3 2] over 4 trailing elements: no error")
	}
	if err := e.B.LayerNorm(e.Alloc(dt, backend.Shape{4, 3, 2}), e.Alloc(dt, backend.Shape{4}), e.Alloc(dt, backend.Shape{4}), x, backend.View{}, backend.View{}, 2, 1e-5); err == nil {
		e.T.Errorf("LayerNorm with mean [4] for 12 groups: no error")
	}
}
