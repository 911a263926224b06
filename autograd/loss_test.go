package autograd_test

import (
	"math"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

func TestCrossEntropyGrad(t *testing.T) {
	ce := func(opt autograd.CrossEntropyOptions) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var { return autograd.CrossEntropy(xs[0], xs[1].Value, opt) }
	}
	tgt := func() *tensor.Tensor { return ints(tensor.Shape{5}, 0, 3, 2, 3, 1) }
	runGradCases(t, []gradCase{
		{name: "mean", inputs: []*tensor.Tensor{normal(1, 5, 4), tgt()}, f: ce(autograd.CrossEntropyOptions{})},
		{name: "sum", inputs: []*tensor.Tensor{normal(2, 5, 4), tgt()}, f: ce(autograd.CrossEntropyOptions{Reduction: autograd.ReductionSum})},
		{name: "none", inputs: []*tensor.Tensor{normal(3, 5, 4), tgt()}, f: ce(autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone})},
		{name: "label smoothing", inputs: []*tensor.Tensor{normal(4, 5, 4), tgt()}, f: ce(autograd.CrossEntropyOptions{LabelSmoothing: 0.1})},
		{
			name:   "ignore index with smoothing",
			inputs: []*tensor.Tensor{normal(5, 5, 4), tgt()},
			f:      ce(autograd.CrossEntropyOptions{LabelSmoothing: 0.2, IgnoreIndex: 3}),
		},
		{
			name:   "ignore class 0 sum",
			inputs: []*tensor.Tensor{normal(6, 5, 4), tgt()},
			f:      ce(autograd.CrossEntropyOptions{UseIgnoreIndex: true, Reduction: autograd.ReductionSum}),
		},
		{
			name:   "default ignore -100 none",
			inputs: []*tensor.Tensor{normal(7, 4, 3), ints(tensor.Shape{4}, 2, -100, 0, 1)},
			f:      ce(autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone, LabelSmoothing: 0.3}),
		},
		{
			name:   "int32 targets",
			inputs: []*tensor.Tensor{normal(8, 3, 6), tensor.FromSlice([]int32{5, 0, 2}, nil)},
			f:      ce(autograd.CrossEntropyOptions{}),
		},
		{
			name:   "spatial [N,C,H,W]",
			inputs: []*tensor.Tensor{normal(9, 2, 3, 2, 2), ints(tensor.Shape{2, 2, 2}, 0, 1, 2, 1, 2, 0, -100, 1)},
			f:      ce(autograd.CrossEntropyOptions{LabelSmoothing: 0.1}),
		},
		{
			name:   "spatial none",
			inputs: []*tensor.Tensor{normal(10, 2, 3, 3), ints(tensor.Shape{2, 3}, 0, 1, 2, 2, 1, 0)},
			f:      ce(autograd.CrossEntropyOptions{Reduction: autograd.ReductionNone}),
		},
		{
			name:   "single row [C]",
			inputs: []*tensor.Tensor{normal(11, 5), ints(tensor.Shape{}, 3)},
			f:      ce(autograd.CrossEntropyOptions{}),
		},
	})
}

// crossEntropyRef is the per-row loss −Σ_c q_c·log softmax(l)_c, with
// q = (1−ε)·onehot(y) + ε/C, in float64.
func crossEntropyRef(l []float64, y int, eps float64) float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = max(m, v)
	}
	var s float64
	for _, v := range l {
		s += math.Exp(v - m)
	}
	lse := m + math.Log(s)
	var loss float64
	for c, v := range l {
		q := eps / float64(len(l))
		if c == y {
			q += 1 - eps
		}
		loss -= q * (v - lse)
	}
	return loss
}

func TestCrossEntropyValue(t *testing.T) {
	const n, c = 6, 4
	targets := []int64{1, -100, 3, 0, 7, 3}
	cases := []struct {
		name   string
		opt    autograd.CrossEntropyOptions
		ignore int64
	}{
		{name: "mean", opt: autograd.CrossEntropyOptions{}, ignore: -100},
		{name: "mean smoothing ignore 7", opt: autograd.CrossEntropyOptions{LabelSmoothing: 0.25, IgnoreIndex: 7}, ignore: 7},
		{name: "sum ignore 3", opt: autograd.CrossEntropyOptions{IgnoreIndex: 3, Reduction: autograd.ReductionSum}, ignore: 3},
		{name: "none ignore 0", opt: autograd.CrossEntropyOptions{UseIgnoreIndex: true, Reduction: autograd.ReductionNone}, ignore: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Targets outside [0, C) other than the ignored one are invalid;
			// map them onto class 2 for this case.
			tv := make([]int64, n)
			for i, y := range targets {
				tv[i] = y
				if y != tc.ignore && (y < 0 || y >= c) {
					tv[i] = 2
				}
			}
			lt := normal(42, n, c)
			l := lt.Float64s()
			logits := autograd.Const(lt)
			defer logits.Release()
			tgt := tensor.FromSlice(tv, nil)
			defer tgt.Release()
			out := autograd.CrossEntropy(logits, tgt, tc.opt)
			defer out.Release()

			rows := make([]float64, n)
			var sum float64
			kept := 0
			for i, y := range tv {
				if y == tc.ignore {
					continue
				}
				rows[i] = crossEntropyRef(l[i*c:(i+1)*c], int(y), tc.opt.LabelSmoothing)
				sum += rows[i]
				kept++
			}
			var want []float64
			switch tc.opt.Reduction {
			case autograd.ReductionMean:
				want = []float64{sum / float64(kept)}
			case autograd.ReductionSum:
				want = []float64{sum}
			case autograd.ReductionNone:
				want = rows
			}
			got := out.Value.Float64s()
			if len(got) != len(want) {
				t.Fatalf("got %d values, want %d", len(got), len(want))
			}
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-12*(1+math.Abs(want[i])) {
					t.Errorf("value %d: %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}

func TestMSELossGrad(t *testing.T) {
	mse := func(r autograd.Reduction) func(xs []*autograd.Var) *autograd.Var {
		return func(xs []*autograd.Var) *autograd.Var { return autograd.MSELoss(xs[0], xs[1], r) }
	}
	runGradCases(t, []gradCase{
		{name: "mean", inputs: []*tensor.Tensor{normal(1, 3, 4), normal(2, 3, 4)}, f: mse(autograd.ReductionMean)},
		{name: "sum", inputs: []*tensor.Tensor{normal(3, 3, 4), normal(4, 3, 4)}, f: mse(autograd.ReductionSum)},
		{name: "none", inputs: []*tensor.Tensor{normal(5, 3, 4), normal(6, 3, 4)}, f: mse(autograd.ReductionNone)},
		{name: "broadcast target", inputs: []*tensor.Tensor{normal(7, 2, 3, 4), normal(8, 4)}, f: mse(autograd.ReductionMean)},
		{name: "broadcast both", inputs: []*tensor.Tensor{normal(9, 3, 1), normal(10, 1, 5)}, f: mse(autograd.ReductionNone)},
	})
}

func TestMSELossValue(t *testing.T) {
	xv, yv := normal(1, 2, 3), normal(2, 3)
	x, y := autograd.Const(xv), autograd.Const(yv)
	defer x.Release()
	defer y.Release()
	xs, ys := xv.Float64s(), yv.Float64s()
	var sum float64
	for i, v := range xs {
		d := v - ys[i%3]
		sum += d * d
	}
	for _, c := range []struct {
		r    autograd.Reduction
		want float64
	}{{autograd.ReductionMean, sum / 6}, {autograd.ReductionSum, sum}} {
		out := autograd.MSELoss(x, y, c.r)
		if got := out.Value.Item(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%v: %v, want %v", c.r, got, c.want)
		}
		out.Release()
	}
}
