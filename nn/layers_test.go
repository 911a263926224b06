package nn

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/tensor"
)

// TestDropout checks what can be checked of a random mask: the share of
// dropped elements, the scaling of the kept ones, the gradient, the
// identity in evaluation mode, and reproducibility from the seed.
func TestDropout(t *testing.T) {
	t.Parallel()
	const n = 200000
	for _, p := range []float64{0.1, 0.5, 0.8} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			t.Parallel()
			g := tensor.NewGenerator(11)
			d := NewDropout(p, g)
			x := autograd.Param(tensor.Ones(tensor.Shape{n}))
			defer x.Release()
			y := d.Forward(x)
			defer y.Release()
			gy := g.Randn(tensor.Shape{n})
			defer gy.Release()
			y.BackwardWith(gy)

			ys, gs, dx := y.Value.Float32s(), gy.Float32s(), x.Grad().Float32s()
			scale := float32(1 / (1 - p))
			dropped := 0
			for i, v := range ys {
				switch {
				case v == 0:
					dropped++
					if dx[i] != 0 {
						t.Fatalf("dropped element %d has gradient %v", i, dx[i])
					}
				case math.Abs(float64(v-scale)) > 1e-6*float64(scale):
					t.Fatalf("kept element %d is %v, want 1/(1−p) = %v", i, v, scale)
				case math.Abs(float64(dx[i]-gs[i]*scale)) > 1e-6*math.Abs(float64(gs[i]*scale)):
					t.Fatalf("gradient %d is %v, want %v", i, dx[i], gs[i]*scale)
				}
			}
			share, sd := float64(dropped)/n, math.Sqrt(p*(1-p)/n)
			if math.Abs(share-p) > 5*sd {
				t.Errorf("dropped %.4f of the elements, want %v ± %.4f", share, p, 5*sd)
			}

			// The next pass draws a new mask; the same seed gives the same
			// masks.
			y2 := d.Forward(x)
			defer y2.Release()
			if slices.Equal(y2.Value.Float32s(), ys) {
				t.Errorf("two passes drew the same mask")
			}
			again := NewDropout(p, tensor.NewGenerator(11))
			yr := again.Forward(x)
			defer yr.Release()
			if !slices.Equal(yr.Value.Float32s(), ys) {
				t.Errorf("the same seed drew a different mask")
			}

			Eval(d)
			x.ZeroGrad()
			ye := d.Forward(x)
			defer ye.Release()
			ye.BackwardWith(gy)
			if !slices.Equal(ye.Value.Float32s(), x.Value.Float32s()) || !slices.Equal(x.Grad().Float32s(), gs) {
				t.Errorf("evaluation mode is not the identity")
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Errorf("NewDropout(1) did not panic")
		}
	}()
	NewDropout(1, tensor.NewGenerator(1))
}

// TestAttentionDropout checks that dropout on the attention weights is off
// in evaluation mode and unbiased in training: the output is linear in the
// weights, so the mean of many training passes approaches the evaluation
// output.
func TestAttentionDropout(t *testing.T) {
	t.Parallel()
	const passes = 1000
	with := NewMultiheadAttention(4, 2, AttentionOptions{Dropout: 0.3}, tensor.NewGenerator(5), tensor.Of(tensor.Float64))
	without := NewMultiheadAttention(4, 2, AttentionOptions{}, tensor.NewGenerator(5), tensor.Of(tensor.Float64))
	defer with.Release()
	defer without.Release()
	x := autograd.Const(tensor.NewGenerator(6).Randn(tensor.Shape{1, 3, 4}, tensor.Of(tensor.Float64)))
	defer x.Release()

	run := func(m *MultiheadAttention) []float64 {
		y := m.Forward(x)
		defer y.Release()
		return y.Value.Float64s()
	}
	ref := run(without)
	Eval(with)
	if err := compare("eval output", tensor.FromSlice(run(with), nil), tensor.FromSlice(ref, nil), tol64); err != nil {
		t.Errorf("dropout in evaluation mode: %v", err)
	}
	Train(with)
	sum, sq := make([]float64, len(ref)), make([]float64, len(ref))
	changed := false
	autograd.NoGrad(func() {
		for range passes {
			for i, v := range run(with) {
				sum[i] += v
				sq[i] += v * v
				changed = changed || math.Abs(v-ref[i]) > 1e-9
			}
		}
	})
	if !changed {
		t.Fatalf("training passes never differed from evaluation")
	}
	for i := range ref {
		mean := sum[i] / passes
		sd := math.Sqrt(max(sq[i]/passes-mean*mean, 0))
		if math.Abs(mean-ref[i]) > 5*sd/math.Sqrt(passes)+1e-12 {
			t.Errorf("element %d: mean of training passes %.5f, evaluation output %.5f (±%.5f)", i, mean, ref[i], 5*sd/math.Sqrt(passes))
		}
	}
}

func TestBatchNormCounter(t *testing.T) {
	t.Parallel()
	bn := NewBatchNorm2d(2, BatchNormOptions{})
	defer bn.Release()
	x := autograd.Const(tensor.NewGenerator(1).Randn(tensor.Shape{3, 2, 2, 2}))
	defer x.Release()
	for range 3 {
		bn.Forward(x).Release()
	}
	Eval(bn)
	bn.Forward(x).Release()
	if n := bn.NumBatchesTracked.Item(); n != 3 {
		t.Errorf("num_batches_tracked = %v after 3 training and 1 evaluation passes, want 3", n)
	}

	// Momentum 0 keeps the running statistics.
	Train(bn)
	bn.Momentum = 0
	before := bn.RunningMean.Float32s()
	bn.Forward(x).Release()
	if !slices.Equal(bn.RunningMean.Float32s(), before) {
		t.Errorf("momentum 0 changed the running mean")
	}
}

func TestEmptySequential(t *testing.T) {
	t.Parallel()
	s := NewSequential()
	x := autograd.Param(tensor.FromSlice([]float32{1, 2}, nil))
	defer x.Release()
	y := s.Forward(x)
	defer y.Release()
	y.BackwardWith(x.Value)
	if !slices.Equal(y.Value.Float32s(), []float32{1, 2}) || !slices.Equal(x.Grad().Float32s(), []float32{1, 2}) {
		t.Errorf("empty Sequential is not the identity")
	}
}

// countingDevice is a CPU backend that counts its live buffers.
type countingDevice struct {
	*cpu.Backend
	live atomic.Int64
}

func (d *countingDevice) Alloc(n int) (backend.Buffer, error) {
	b, err := d.Backend.Alloc(n)
	if err == nil {
		d.live.Add(1)
	}
	return b, err
}

func (d *countingDevice) Free(b backend.Buffer) {
	d.live.Add(-1)
	d.Backend.Free(b)
}

// TestNoLeaks runs forward and backward passes of every layer on a device
// that counts buffers and checks that after releasing the outputs and
// clearing the gradients only the module's state and the input remain,
// and nothing after releasing those. It also checks that layers keep their
// tensors on the input's device.
func TestNoLeaks(t *testing.T) {
	t.Parallel()
	type build func(g *tensor.Generator, o tensor.Option) Layer
	loss := func(f func(x *autograd.Var) *autograd.Var) *lossModule { return &lossModule{f: f} }
	for _, c := range []struct {
		name  string
		shape tensor.Shape
		train bool
		build build
	}{
		{"linear", tensor.Shape{3, 5}, true, func(g *tensor.Generator, o tensor.Option) Layer { return NewLinear(5, 4, true, g, o) }},
		{"conv", tensor.Shape{2, 3, 6, 6}, true, func(g *tensor.Generator, o tensor.Option) Layer {
			return NewConv2d(3, 4, 3, Conv2dOptions{Stride: 2, Padding: 1}, g, o)
		}},
		{"batchnorm train", tensor.Shape{2, 3, 4, 4}, true, func(_ *tensor.Generator, o tensor.Option) Layer { return NewBatchNorm2d(3, BatchNormOptions{}, o) }},
		{"batchnorm eval", tensor.Shape{2, 3, 4, 4}, false, func(_ *tensor.Generator, o tensor.Option) Layer { return NewBatchNorm2d(3, BatchNormOptions{}, o) }},
		{"layernorm", tensor.Shape{2, 3, 4}, true, func(_ *tensor.Generator, o tensor.Option) Layer {
			return NewLayerNorm(tensor.Shape{3, 4}, LayerNormOptions{}, o)
		}},
		{"dropout", tensor.Shape{4, 5}, true, func(g *tensor.Generator, _ tensor.Option) Layer { return NewDropout(0.5, g) }},
		{"gelu", tensor.Shape{4, 5}, true, func(*tensor.Generator, tensor.Option) Layer { return NewGELU(false) }},
		{"maxpool", tensor.Shape{1, 2, 5, 5}, true, func(*tensor.Generator, tensor.Option) Layer { return NewMaxPool2d(2, PoolOptions{CeilMode: true}) }},
		{"adaptive", tensor.Shape{1, 2, 7, 5}, true, func(*tensor.Generator, tensor.Option) Layer { return NewAdaptiveAvgPool2d(3, 2) }},
		{"sequential", tensor.Shape{2, 3, 4, 4}, true, func(g *tensor.Generator, o tensor.Option) Layer {
			return NewSequential(NewConv2d(3, 2, 1, Conv2dOptions{}, g, o), NewReLU(), NewAvgPool2d(2, PoolOptions{}), NewFlatten(1, -1), NewIdentity(), NewLinear(8, 3, true, g, o))
		}},
		{"attention", tensor.Shape{2, 3, 4}, true, func(g *tensor.Generator, o tensor.Option) Layer {
			m := NewMultiheadAttention(4, 2, AttentionOptions{Dropout: 0.2}, g, o)
			mask := tensor.Zeros(tensor.Shape{3, 3}, tensor.Of(tensor.Bool), o)
			l := loss(func(x *autograd.Var) *autograd.Var { return m.Attend(x, mask) })
			l.RegisterModule("attention", m)
			l.RegisterBuffer("mask", mask)
			return l
		}},
		{"model", tensor.Shape{2, 3, 8, 8}, true, func(_ *tensor.Generator, o tensor.Option) Layer { return netOf(1, o) }},
		{"cross-entropy", tensor.Shape{4, 3}, true, func(_ *tensor.Generator, o tensor.Option) Layer {
			target := tensor.Zeros(tensor.Shape{4}, tensor.Of(tensor.Int64), o)
			l := loss(func(x *autograd.Var) *autograd.Var { return NewCrossEntropyLoss(0.1).Forward(x, target) })
			l.RegisterBuffer("target", target)
			return l
		}},
		{"mse", tensor.Shape{4, 3}, true, func(_ *tensor.Generator, o tensor.Option) Layer {
			return loss(func(x *autograd.Var) *autograd.Var { return MSELoss{}.Forward(x, x) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dev := &countingDevice{Backend: cpu.New()}
			on := tensor.On(dev)
			g := tensor.NewGenerator(3)
			l := c.build(g, on)
			l.SetTraining(c.train)
			x := autograd.Param(g.Randn(c.shape, on))
			held := dev.live.Load()
			for range 2 {
				y := l.Forward(x)
				if y.Value.Device() != dev {
					t.Fatalf("output on %s, input on the counting device", y.Value.Device().Name())
				}
				gy := tensor.OnesLike(y.Value)
				y.BackwardWith(gy)
				gy.Release()
				y.Release()
				ZeroGrad(l)
				x.ZeroGrad()
				if n := dev.live.Load(); n != held {
					t.Fatalf("%d buffers live after a pass, %d before", n, held)
				}
			}
			autograd.NoGrad(func() { l.Forward(x).Release() })
			if n := dev.live.Load(); n != held {
				t.Fatalf("%d buffers live after a no-grad pass, %d before", n, held)
			}
			l.Release()
			x.Release()
			if n := dev.live.Load(); n != 0 {
				t.Errorf("%d buffers live after releasing the module and the input", n)
			}
		})
	}
}

// TestBatchNormForwardReLU checks that the fused form computes ReLU of the
// batch norm — outputs, running statistics, counter and every gradient —
// in training and in evaluation.
func TestBatchNormForwardReLU(t *testing.T) {
	g := tensor.NewGenerator(3)
	x0 := g.Normal(tensor.Shape{4, 3, 5, 5}, 0.3, 1)
	defer x0.Release()
	a, b := NewBatchNorm2d(3, BatchNormOptions{}), NewBatchNorm2d(3, BatchNormOptions{})
	defer a.Release()
	defer b.Release()
	for _, bn := range []*BatchNorm2d{a, b} {
		bn.Weight.Value.CopyFrom(g.Uniform(tensor.Shape{3}, 0.5, 1.5))
		bn.Bias.Value.CopyFrom(g.Uniform(tensor.Shape{3}, -0.5, 0.5))
	}
	b.Weight.Value.CopyFrom(a.Weight.Value)
	b.Bias.Value.CopyFrom(a.Bias.Value)
	for _, training := range []bool{true, false} {
		a.SetTraining(training)
		b.SetTraining(training)
		xa, xb := autograd.Param(x0.Clone()), autograd.Param(x0.Clone())
		ya := a.ForwardReLU(xa)
		yb0 := b.Forward(xb)
		yb := autograd.ReLU(yb0)
		// A weighted sum, so that the gradient reaching the batch norm is
		// not the same for every element.
		w := autograd.Const(g.Normal(tensor.Shape{4, 3, 5, 5}, 0, 1))
		la, lb := autograd.Sum(autograd.Mul(ya, w)), autograd.Sum(autograd.Mul(yb, w))
		la.Backward()
		lb.Backward()
		pairs := [][2]*tensor.Tensor{
			{ya.Value, yb.Value}, {a.RunningMean, b.RunningMean}, {a.RunningVar, b.RunningVar},
			{xa.Grad(), xb.Grad()}, {a.Weight.Grad(), b.Weight.Grad()}, {a.Bias.Grad(), b.Bias.Grad()},
		}
		for i, p := range pairs {
			if p[0] == nil || p[1] == nil {
				t.Fatalf("training %v: pair %d missing", training, i)
			}
			got, want := p[0].Float64s(), p[1].Float64s()
			for j := range want {
				if math.Abs(got[j]-want[j]) > 1e-5*(1+math.Abs(want[j])) {
					t.Fatalf("training %v: pair %d element %d: fused %v, composed %v", training, i, j, got[j], want[j])
				}
			}
		}
		if a.NumBatchesTracked.Item() != b.NumBatchesTracked.Item() {
			t.Errorf("counters %v and %v", a.NumBatchesTracked.Item(), b.NumBatchesTracked.Item())
		}
		for _, v := range []*autograd.Var{ya, yb, yb0, xa, xb, w, la, lb} {
			v.Release()
		}
		ZeroGrad(a)
		ZeroGrad(b)
	}
}
