package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refRowLoss is −Σ_c q_c·log softmax(x)_c for one row.
func refRowLoss(x []float64, target int, eps float64) float64 {
	z := 0.0
	for _, v := range x {
		z += math.Exp(v)
	}
	l := 0.0
	for c, v := range x {
		q := eps / float64(len(x))
		if c == target {
			q += 1 - eps
		}
		l -= q * (v - math.Log(z))
	}
	return l
}

func TestCrossEntropy(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	const n, classes = 6, 4
	for _, dt := range []DType{Float32, Float64} {
		for _, tt := range []DType{Int32, Int64, Uint8} {
			for _, p := range []CrossEntropyParams{{IgnoreIndex: -100}, {IgnoreIndex: 3, LabelSmoothing: 0.2}} {
				if tt == Uint8 && p.IgnoreIndex < 0 {
					continue
				}
				// logits are the transpose of a [C, N] tensor: not contiguous.
				lv := uniformValues(rng, dt, n*classes, -3, 3)
				lt := FromSlice(lv, Shape{classes, n}, Of(dt))
				logits := lt.T()
				targets := []int64{0, 3, 1, 2, 1, 3}
				if p.IgnoreIndex < 0 {
					targets[2] = p.IgnoreIndex
				}
				tgt := FromSlice(targets, nil, Of(tt))
				tv := tgt.Int64s()
				loss := CrossEntropy(logits, tgt, p)
				want := make([]float64, n)
				row := make([]float64, classes)
				for i := range want {
					for c := range row {
						row[c] = lv[c*n+i]
					}
					if tv[i] != p.IgnoreIndex {
						want[i] = refRowLoss(row, int(tv[i]), p.LabelSmoothing)
					}
				}
				tol := 1e-5
				if dt == Float64 {
					tol = 1e-12
				}
				if !loss.Shape().Equal(Shape{n}) || loss.DType() != dt {
					t.Fatalf("loss is %v%v", loss.DType(), loss.Shape())
				}
				assertClose(t, "CrossEntropy", loss.Float64s(), want, tol, tol)

				// A scalar dloss is the gradient of the summed loss.
				one := Scalar(1, Of(dt))
				dx := CrossEntropyBackward(logits, tgt, one, p)
				ones := Ones(Shape{n}, Of(dt))
				dx2 := CrossEntropyBackward(logits, tgt, ones, p)
				assertClose(t, "CrossEntropyBackward scalar vs [N]", dx.Float64s(), dx2.Float64s(), 0, 0)
				for _, r := range []*Tensor{loss, one, dx, ones, dx2, tgt, logits, lt} {
					r.Release()
				}
			}
		}
	}
}

// TestCrossEntropyBackward compares the gradient of Σ dloss·loss with central
// differences of CrossEntropy.
func TestCrossEntropyBackward(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	shape := Shape{5, 7}
	cases := []struct {
		targets []int64
		p       CrossEntropyParams
	}{
		{[]int64{6, 0, 2, -1, 2}, CrossEntropyParams{IgnoreIndex: -1}},
		{[]int64{6, 0, 2, 5, 2}, CrossEntropyParams{IgnoreIndex: 2, LabelSmoothing: 0.3}},
	}
	for _, c := range cases {
		p := c.p
		tgt := FromSlice(c.targets, nil)
		xv := uniformValues(rng, Float64, shape.NumElements(), -3, 3)
		dlv := uniformValues(rng, Float64, shape[0], -1, 1)
		loss := func(v []float64) float64 {
			x := FromSlice(v, shape)
			defer x.Release()
			l := CrossEntropy(x, tgt, p)
			defer l.Release()
			return weightedSum(l, dlv)
		}
		x, dl := FromSlice(xv, shape), FromSlice(dlv, nil)
		dx := CrossEntropyBackward(x, tgt, dl, p)
		assertClose(t, "CrossEntropyBackward", dx.Float64s(), differences(loss, xv), 1e-6, 1e-8)
		x.Release()
		dl.Release()
		dx.Release()
		tgt.Release()
	}
}

func TestCrossEntropyPanics(t *testing.T) {
	t.Parallel()
	logits := Zeros(Shape{3, 4})
	defer logits.Release()
	cube := Zeros(Shape{3, 4, 2})
	defer cube.Release()
	good := FromSlice([]int32{0, 1, 2}, nil)
	defer good.Release()
	bad := FromSlice([]int64{0, 4, 2}, nil)
	defer bad.Release()
	short := FromSlice([]int64{0, 1}, nil)
	defer short.Release()
	ftgt := Zeros(Shape{3})
	defer ftgt.Release()
	dl := Zeros(Shape{2})
	defer dl.Release()
	p := CrossEntropyParams{IgnoreIndex: -100}
	expectPanic(t, "rank", func() { CrossEntropy(cube, good, p) }, "CrossEntropy", "[3 4 2]")
	expectPanic(t, "range", func() { CrossEntropy(logits, bad, p) }, "CrossEntropy", "target 4", "row 1")
	expectPanic(t, "length", func() { CrossEntropy(logits, short, p) }, "CrossEntropy", "[2]")
	expectPanic(t, "dtype", func() { CrossEntropy(logits, ftgt, p) }, "CrossEntropy", "float32")
	expectPanic(t, "dloss", func() { CrossEntropyBackward(logits, good, dl, p) }, "CrossEntropyBackward", "dloss", "[2]")
}
