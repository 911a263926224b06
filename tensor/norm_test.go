package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refBatchNormForward normalises x [N, C, S] per channel with batch
// statistics (training) or the given ones.
func refBatchNormForward(x []float64, n, c, s int, w, b, mean, variance []float64, eps float64) []float64 {
	if mean == nil {
		mean, variance = make([]float64, c), make([]float64, c)
		m := float64(n * s)
		for ch := range c {
			for i := range n {
				for k := range s {
					mean[ch] += x[(i*c+ch)*s+k] / m
				}
			}
			for i := range n {
				for k := range s {
					d := x[(i*c+ch)*s+k] - mean[ch]
					variance[ch] += d * d / m
				}
			}
		}
	}
	y := make([]float64, len(x))
	for i := range n {
		for ch := range c {
			for k := range s {
				at := (i*c+ch)*s + k
				y[at] = (x[at]-mean[ch])/math.Sqrt(variance[ch]+eps)*w[ch] + b[ch]
			}
		}
	}
	return y
}

func TestBatchNormGrad(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	const n, c, s = 3, 2, 4
	shape := Shape{n, c, 2, 2}
	xv := uniformValues(rng, Float64, n*c*s, -2, 2)
	dyv := uniformValues(rng, Float64, n*c*s, -1, 1)
	wv, bv := []float64{0.7, 1.3}, []float64{0.1, -0.4}
	rmv, rvv := []float64{0.2, -0.3}, []float64{0.9, 1.7}
	const eps = 1e-5
	for _, training := range []bool{true, false} {
		p := NormParams{Eps: eps, Momentum: 0.1, Training: training}
		var mean, variance []float64
		if !training {
			mean, variance = rmv, rvv
		}
		loss := func(x, w, b []float64) float64 {
			y := refBatchNormForward(x, n, c, s, w, b, mean, variance, eps)
			l := 0.0
			for i := range y {
				l += y[i] * dyv[i]
			}
			return l
		}
		x, w, b := FromSlice(xv, shape), FromSlice(wv, nil), FromSlice(bv, nil)
		rm, rv := FromSlice(rmv, nil), FromSlice(rvv, nil)
		y, sm, sis := BatchNorm(x, w, b, rm, rv, p)
		assertClose(t, "BatchNorm", y.Float64s(), refBatchNormForward(xv, n, c, s, wv, bv, mean, variance, eps), 1e-12, 1e-12)
		if !training {
			if sm != nil || sis != nil {
				t.Fatalf("BatchNorm in evaluation returned statistics")
			}
			// The evaluation gradient comes from the statistics that normalised.
			sm = FromSlice(rmv, nil)
			sis = FromSlice([]float64{1 / math.Sqrt(rvv[0]+eps), 1 / math.Sqrt(rvv[1]+eps)}, nil)
		}
		dy := FromSlice(dyv, shape)
		dx, dw, db := BatchNormBackward(dy, x, w, sm, sis, p)
		assertClose(t, "BatchNormBackward dx", dx.Float64s(), differences(func(v []float64) float64 { return loss(v, wv, bv) }, xv), 1e-6, 1e-7)
		assertClose(t, "BatchNormBackward dweight", dw.Float64s(), differences(func(v []float64) float64 { return loss(xv, v, bv) }, wv), 1e-6, 1e-7)
		assertClose(t, "BatchNormBackward dbias", db.Float64s(), differences(func(v []float64) float64 { return loss(xv, wv, v) }, bv), 1e-6, 1e-7)
		dxn, dwn, dbn := BatchNormBackward(dy, x, nil, sm, sis, p)
		if dwn != nil || dbn != nil {
			t.Errorf("BatchNormBackward without weight returned parameter gradients")
		}
		for _, r := range []*Tensor{x, w, b, rm, rv, y, sm, sis, dy, dx, dw, db, dxn} {
			r.Release()
		}
	}
}

// TestBatchNormRunningStats checks the in-place update, including running
// statistics that are strided views of a larger buffer.
func TestBatchNormRunningStats(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	const n, c, s = 4, 3, 5
	xv := uniformValues(rng, Float32, n*c*s, -1, 3)
	x := FromSlice(xv, Shape{n, c, s}, Of(Float32))
	defer x.Release()
	store := FromSlice([]float32{0.5, 9, 1, 0.1, 9, 0.2, -0.3, 9, 0.7}, Shape{3, 3})
	defer store.Release()
	rm, rv := store.Select(1, 0), store.Select(1, 2) // stride 3
	defer rm.Release()
	defer rv.Release()
	before := store.Float64s()
	const m = 0.25
	y, sm, sis := BatchNorm(x, nil, nil, rm, rv, NormParams{Eps: 1e-5, Momentum: m, Training: true})
	defer y.Release()
	defer sm.Release()
	defer sis.Release()
	after := store.Float64s()
	for ch := range c {
		mu, ss := 0.0, 0.0
		for i := range n {
			for k := range s {
				mu += xv[(i*c+ch)*s+k] / (n * s)
			}
		}
		for i := range n {
			for k := range s {
				d := xv[(i*c+ch)*s+k] - mu
				ss += d * d
			}
		}
		wantMean := (1-m)*before[ch*3] + m*mu
		wantVar := (1-m)*before[ch*3+2] + m*ss/(n*s-1)
		assertClose(t, "running mean", after[ch*3:ch*3+1], []float64{wantMean}, 1e-5, 1e-6)
		assertClose(t, "running var", after[ch*3+2:ch*3+3], []float64{wantVar}, 1e-5, 1e-6)
		if after[ch*3+1] != 9 {
			t.Errorf("BatchNorm wrote outside the running statistics: %v", after)
		}
		assertClose(t, "save invstd", sis.Float64s()[ch:ch+1], []float64{1 / math.Sqrt(ss/(n*s)+1e-5)}, 1e-5, 1e-6)
	}
}

func TestLayerNormGrad(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 14))
	shape := Shape{2, 3, 2, 2}
	const d, eps = 4, 1e-5
	xv := uniformValues(rng, Float64, shape.NumElements(), -2, 2)
	dyv := uniformValues(rng, Float64, shape.NumElements(), -1, 1)
	wv := uniformValues(rng, Float64, d, 0.5, 1.5)
	bv := uniformValues(rng, Float64, d, -1, 1)
	forward := func(x, w, b []float64) float64 {
		l := 0.0
		for r := range len(x) / d {
			g := x[r*d : (r+1)*d]
			mu, v := 0.0, 0.0
			for _, e := range g {
				mu += e / d
			}
			for _, e := range g {
				v += (e - mu) * (e - mu) / d
			}
			for j, e := range g {
				l += dyv[r*d+j] * ((e-mu)/math.Sqrt(v+eps)*w[j] + b[j])
			}
		}
		return l
	}
	x, dy := FromSlice(xv, shape), FromSlice(dyv, shape)
	w, b := FromSlice(wv, Shape{2, 2}), FromSlice(bv, Shape{2, 2})
	defer x.Release()
	defer dy.Release()
	defer w.Release()
	defer b.Release()
	y, mean, rstd := LayerNorm(x, w, b, d, eps)
	defer y.Release()
	defer mean.Release()
	defer rstd.Release()
	if !mean.Shape().Equal(Shape{2, 3}) || !rstd.Shape().Equal(Shape{2, 3}) {
		t.Fatalf("mean %v and rstd %v, want shape [2 3]", mean.Shape(), rstd.Shape())
	}
	dx, dw, db := LayerNormBackward(dy, x, w, mean, rstd, d)
	defer dx.Release()
	defer dw.Release()
	defer db.Release()
	if !dw.Shape().Equal(Shape{2, 2}) || !db.Shape().Equal(Shape{2, 2}) {
		t.Fatalf("dweight %v and dbias %v, want weight's shape [2 2]", dw.Shape(), db.Shape())
	}
	assertClose(t, "LayerNormBackward dx", dx.Float64s(), differences(func(v []float64) float64 { return forward(v, wv, bv) }, xv), 1e-6, 1e-7)
	assertClose(t, "LayerNormBackward dweight", dw.Float64s(), differences(func(v []float64) float64 { return forward(xv, v, bv) }, wv), 1e-6, 1e-7)
	assertClose(t, "LayerNormBackward dbias", db.Float64s(), differences(func(v []float64) float64 { return forward(xv, wv, v) }, bv), 1e-6, 1e-7)

	yn, mn, rn := LayerNorm(x, nil, nil, 12, eps)
	defer yn.Release()
	defer mn.Release()
	defer rn.Release()
	if !mn.Shape().Equal(Shape{2}) {
		t.Errorf("mean over 12 trailing elements of %v has shape %v, want [2]", shape, mn.Shape())
	}
	dxn, dwn, dbn := LayerNormBackward(dy, x, nil, mn, rn, 12)
	defer dxn.Release()
	if dwn != nil || dbn != nil {
		t.Errorf("LayerNormBackward without weight returned parameter gradients")
	}
}

func TestNormPanics(t *testing.T) {
	t.Parallel()
	x := Zeros(Shape{4, 3, 2})
	defer x.Release()
	v1 := Zeros(Shape{1})
	defer v1.Release()
	w4 := Zeros(Shape{4})
	defer w4.Release()
	w64 := Zeros(Shape{3}, Of(Float64))
	defer w64.Release()
	train := NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
	expectPanic(t, "rank", func() { BatchNorm(v1, nil, nil, nil, nil, train) }, "BatchNorm", "[1]")
	expectPanic(t, "weight", func() { BatchNorm(x, w4, nil, nil, nil, train) }, "BatchNorm", "weight", "[4]")
	expectPanic(t, "dtype", func() { BatchNorm(x, w64, nil, nil, nil, train) }, "BatchNorm", "float64")
	expectPanic(t, "eval", func() { BatchNorm(x, nil, nil, nil, nil, NormParams{Eps: 1e-5}) }, "BatchNorm", "runningMean")
	r3 := Zeros(Shape{3})
	defer r3.Release()
	expectPanic(t, "running pair", func() { BatchNorm(x, nil, nil, r3, nil, train) }, "BatchNorm", "together")
	expectPanic(t, "normSize", func() { LayerNorm(x, nil, nil, 4, 1e-5) }, "LayerNorm", "normSize 4", "[4 3 2]")
	expectPanic(t, "ln weight", func() { LayerNorm(x, w4, nil, 2, 1e-5) }, "LayerNorm", "weight", "[4]")
}
