package sparse_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/sparse"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

func TestProbabilities(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		L := 1 + r.IntN(40)
		norms := make([]float64, L)
		known := make([]bool, L)
		for i := range norms {
			norms[i] = math.Exp(3 * r.NormFloat64())
			known[i] = r.IntN(5) > 0
		}
		budget := 0.05 + 0.95*r.Float64()
		pMin := budget * r.Float64()
		if pMin == 0 {
			pMin = budget
		}
		p := sparse.Probabilities(norms, known, budget, pMin)
		sum := 0.0
		for i, v := range p {
			if v < pMin*(1-1e-12) || v > 1 {
				t.Fatalf("p[%d] = %v outside [%v, 1]", i, v, pMin)
			}
			sum += v
		}
		if math.Abs(sum-budget*float64(L)) > 1e-9*float64(L) {
			t.Fatalf("Σp = %v, want %v", sum, budget*float64(L))
		}
		// Inside the clip the probabilities follow the norms.
		var ratio float64
		for i, v := range p {
			if v > pMin && v < 1 && known[i] {
				if ratio == 0 {
					ratio = v / norms[i]
				} else if math.Abs(v/norms[i]-ratio) > 1e-9*ratio {
					t.Fatalf("p[%d]/norm = %v, another layer's %v", i, v/norms[i], ratio)
				}
			}
		}
		// Probabilities in proportion to the norms beat uniform ones.
		uniform := make([]float64, L)
		for i := range uniform {
			uniform[i] = budget
		}
		all := make([]bool, L)
		for i := range all {
			all[i] = true
		}
		if v, u := sparse.Variance(norms, sparse.Probabilities(norms, all, budget, pMin)), sparse.Variance(norms, uniform); v > u*(1+1e-9) {
			t.Fatalf("variance %v with p ∝ ‖g‖, %v with uniform p", v, u)
		}
	}
	for _, v := range sparse.Probabilities([]float64{1, 2, 3}, []bool{true, true, true}, 1, 0.5) {
		if v != 1 {
			t.Errorf("budget 1 gives p = %v", v)
		}
	}
}

// bands returns n noisy 8×8 images with c channels in 4 classes.
func bands(n, c int, seed uint64) *dataset.Images {
	r := rand.New(rand.NewPCG(seed, 1))
	m := &dataset.Images{N: n, H: 8, W: 8, C: c, Pixels: make([]uint8, n*64*c), Labels: make([]int32, n), Classes: []string{"a", "b", "c", "d"}}
	for i := range n {
		k := r.IntN(4)
		m.Labels[i] = int32(k)
		img := m.Image(i)
		for p := range img {
			v := r.IntN(100)
			if (p/(8*c))/2 == k {
				v += 120
			}
			img[p] = uint8(v)
		}
	}
	return m
}

// fixture is a model, a batch and JointSpar over one worker, stepped by
// hand: forward, backward and AfterBackward without an optimizer step.
type fixture struct {
	model  nn.Layer
	params []nn.NamedParameter
	x, y   *tensor.Tensor
	js     *sparse.JointSpar
	sc     *train.StepContext
}

func newFixture(t *testing.T, name string, opt sparse.Options) *fixture {
	t.Helper()
	return newFixtureOn(t, name, opt, dist.NewLocal(1)[0])
}

// newFixtureOn is newFixture over c: the workers of one in-process world
// hold the same model and batch, so they compute the same gradient.
func newFixtureOn(t *testing.T, name string, opt sparse.Options, c dist.Comm) *fixture {
	t.Helper()
	data := bands(32, 3, 2)
	model, err := models.Build(name, models.Config{InChannels: 3, Height: 8, Width: 8, NumClasses: 4}, tensor.NewGenerator(5))
	if err != nil {
		t.Fatal(err)
	}
	l, err := dataset.NewLoader(data, dataset.LoaderOptions{BatchSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := l.Next()
	params := model.NamedParameters()
	vars := make([]*autograd.Var, len(params))
	names := make([]string, len(params))
	for i, p := range params {
		vars[i], names[i] = p.Param, p.Name
	}
	// Plain SGD with rate 1: a step moves the parameters by minus the
	// scaled gradient, the estimate.
	o := optim.NewSGD([]*optim.Group{optim.NewGroup(vars, names, 1, 0)}, optim.SGDOptions{})
	js, err := sparse.New(c, opt)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{model: model, params: params, x: b.X, y: b.Y, js: js,
		sc: &train.StepContext{Params: params, Model: model, Optimizer: o, TotalSteps: 1 << 20, StepsPerEpoch: 1 << 20}}
	t.Cleanup(func() { js.Close(); model.Release() })
	// Setup is collective: the workers of a larger world run it together.
	if c.Size() == 1 {
		if err := js.Setup(f.sc); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// estimate returns step's estimate of the gradient — minus the
// displacement of an SGD step with rate 1, taken and undone — flattened,
// the layers drawn, and the FLOPs of its backward pass.
func (f *fixture) estimate(t *testing.T, step int) ([]float64, []bool, int64) {
	t.Helper()
	g, m, flops, err := f.step(step)
	if err != nil {
		t.Fatal(err)
	}
	return g, m, flops
}

// step is estimate, safe to call from a goroutine of its own.
func (f *fixture) step(step int) ([]float64, []bool, int64, error) {
	f.sc.Step = step
	if err := f.js.BeforeStep(f.sc); err != nil {
		return nil, nil, 0, err
	}
	x := autograd.Const(f.x.Retain())
	out := f.model.Forward(x)
	loss := autograd.CrossEntropy(out, f.y, autograd.CrossEntropyOptions{})
	var flops int64
	if loss.RequiresGrad() {
		flops = tensor.CountFLOPs(loss.Backward)
	}
	loss.Release()
	out.Release()
	x.Release()
	if err := f.js.AfterBackward(f.sc); err != nil {
		return nil, nil, 0, err
	}
	var before []*tensor.Tensor
	for _, p := range f.params {
		before = append(before, p.Param.Value.Clone())
	}
	f.sc.Optimizer.Step()
	var g []float64
	for i, p := range f.params {
		after := tensor.ToSlice[float64](p.Param.Value)
		for k, v := range tensor.ToSlice[float64](before[i]) {
			g = append(g, v-after[k])
		}
		p.Param.Value.CopyFrom(before[i])
		before[i].Release()
		p.Param.ZeroGrad()
	}
	if err := f.js.AfterStep(f.sc); err != nil {
		return nil, nil, 0, err
	}
	return g, f.js.Sampled(), flops, nil
}

// TestUnbiased checks by Monte Carlo that the mean of many rescaled
// estimates converges to the full gradient within its standard error, and
// that the expected number of layers per step is the budget. On a fixed
// batch the estimate of layer ℓ is g_ℓ·1{ℓ drawn}/p_ℓ, so each layer's
// mean factor ⟨ĝ_ℓ, g_ℓ⟩/‖g_ℓ‖² must be 1 within its standard error.
func TestUnbiased(t *testing.T) {
	full := newFixture(t, "cnn", sparse.Options{Budget: 1})
	want, _, _ := full.estimate(t, 0)

	f := newFixture(t, "cnn", sparse.Options{Budget: 0.5, Seed: 9})
	spans := layerSpans(t, f, len(want))
	const draws = 800
	factors := make([][]float64, len(spans))
	layers := 0
	for s := range draws {
		g, m, _ := f.estimate(t, s)
		for l, sp := range spans {
			var dot, nn float64
			for i := sp[0]; i < sp[1]; i++ {
				dot += g[i] * want[i]
				nn += want[i] * want[i]
			}
			factors[l] = append(factors[l], dot/nn)
		}
		for _, b := range m {
			if b {
				layers++
			}
		}
	}
	for l, fs := range factors {
		mean, se := meanSE(fs)
		if math.Abs(mean-1) > 4*se || se == 0 {
			t.Errorf("layer %s: mean factor %.4f ± %.4f, want 1", f.js.Layers()[l], mean, se)
		}
		// Without the rescaling the factor would be about p_ℓ: the test
		// tells an unbiased estimate from a biased one.
		if p := f.js.Probabilities()[l]; p < 0.9 && math.Abs(mean*p-1) < 4*se {
			t.Errorf("layer %s: a factor of %.3f is within the error of the unrescaled estimate", f.js.Layers()[l], mean*p)
		}
	}
	L := len(f.js.Layers())
	mean := float64(layers) / draws
	// Each layer is a Bernoulli draw: the count's standard deviation is at most √(L/4).
	if math.Abs(mean-0.5*float64(L)) > 4*math.Sqrt(float64(L)/4/draws) {
		t.Errorf("%.3f layers per step, want %.1f", mean, 0.5*float64(L))
	}
}

// meanSE returns the mean of xs and its standard error.
func meanSE(xs []float64) (float64, float64) {
	n := float64(len(xs))
	var m, sq float64
	for _, v := range xs {
		m += v / n
		sq += v * v / n
	}
	return m, math.Sqrt(max(0, sq-m*m) / n)
}

// layerSpans returns where each of f's layers lies in its flattened
// gradient of n elements.
func layerSpans(t *testing.T, f *fixture, n int) [][2]int {
	t.Helper()
	var spans [][2]int
	off := 0
	for _, name := range f.js.Layers() {
		start := off
		for _, p := range f.params {
			if n := p.Param.Value.NumElements(); len(p.Name) > len(name) && p.Name[:len(name)+1] == name+"." {
				off += n
			}
		}
		spans = append(spans, [2]int{start, off})
	}
	if off != n {
		t.Fatalf("layers cover %d of %d elements", off, n)
	}
	return spans
}

// onAll runs fn for workers 0 to k−1 at once, and fails t on an error.
func onAll(t *testing.T, k int, fn func(r int) error) {
	t.Helper()
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r := range k {
		wg.Go(func() { errs[r] = fn(r) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", r, err)
		}
	}
}

// TestPerWorkerDraws checks per-worker draws by Monte Carlo on 4 workers
// that hold the same batch. Layer ℓ's estimate is then its gradient times
// c/(K·p_ℓ), c the workers that drew it: its mean factor ⟨ĝ_ℓ, g_ℓ⟩/‖g_ℓ‖²
// must be 1 within its standard error, and its mean squared deviation
// from 1 that of c/(K·p_ℓ). With independent draws c ~ Binomial(K, p_ℓ),
// a variance of (1 − p_ℓ)/(K·p_ℓ), K times less than the (1 − p_ℓ)/p_ℓ of
// a draw shared by the workers; balanced draws give c = ⌊K·p_ℓ⌋ or
// ⌈K·p_ℓ⌉, a variance of f(1 − f)/(K·p_ℓ)², f the fractional part of
// K·p_ℓ. Every worker must apply the same update and draw each layer
// with probability p_ℓ.
func TestPerWorkerDraws(t *testing.T) {
	const K = 4
	full := newFixture(t, "cnn", sparse.Options{Budget: 1})
	want, _, _ := full.estimate(t, 0)
	balanced := func(p float64) float64 {
		x := K * p
		f := x - math.Floor(x)
		return f * (1 - f) / (x * x)
	}
	for _, tc := range []struct {
		name     string
		balanced bool
		pMin     float64
		variance func(p float64) float64 // of c/(K·p)
		below    func(p float64) float64 // a summed variance it must stay under half of
	}{
		{"independent", false, 0,
			func(p float64) float64 { return (1 - p) / (K * p) },
			func(p float64) float64 { return (1 - p) / p }},
		// p_min 1/K: every layer goes to a worker or more.
		{"balanced", true, 0, balanced,
			func(p float64) float64 { return (1 - p) / (K * p) }},
		// Layers of K·p < 1 go to no worker at some steps.
		{"balanced, p_min 0.05", true, 0.05, balanced,
			func(p float64) float64 { return (1 - p) / (K * p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPerWorkerDraws(t, want, sparse.Options{Budget: 0.5, PMin: tc.pMin, Seed: 9, PerWorker: true, Balanced: tc.balanced}, tc.variance, tc.below)
		})
	}
}

func checkPerWorkerDraws(t *testing.T, want []float64, opt sparse.Options, variance, below func(p float64) float64) {
	const K = 4
	comms := dist.NewLocal(K)
	fs := make([]*fixture, K)
	for r := range fs {
		fs[r] = newFixtureOn(t, "cnn", opt, comms[r])
	}
	gs := make([][]float64, K)
	onAll(t, K, func(r int) error { return fs[r].js.Setup(fs[r].sc) })
	spans := layerSpans(t, fs[0], len(want))
	L := len(spans)
	const draws = 600
	factor := make([][]float64, L)
	excess := make([][]float64, L)  // (factor − 1)² − variance(p), mean 0
	drawn := make([][]float64, K*L) // 1{worker k drew ℓ} − p_ℓ, mean 0
	var boundVar, gotVar float64
	for s := range draws {
		onAll(t, K, func(r int) (err error) {
			gs[r], _, _, err = fs[r].step(s)
			return err
		})
		for r := 1; r < K; r++ {
			if !slices.Equal(gs[r], gs[0]) {
				t.Fatalf("step %d: worker %d's update differs from worker 0's", s, r)
			}
		}
		p := fs[0].js.Probabilities()
		count := make([]int, L)
		for r := range fs {
			for l, b := range fs[r].js.Sampled() {
				x := -p[l]
				if b {
					x++
					count[l]++
				}
				drawn[r*L+l] = append(drawn[r*L+l], x)
			}
		}
		for l, sp := range spans {
			if opt.Balanced {
				if x := K * p[l]; float64(count[l]) < math.Floor(x) || float64(count[l]) > math.Ceil(x) {
					t.Fatalf("step %d: layer %d drawn by %d workers, K·p = %.3f", s, l, count[l], x)
				}
			}
			var dot, nn float64
			for i := sp[0]; i < sp[1]; i++ {
				dot += gs[0][i] * want[i]
				nn += want[i] * want[i]
			}
			f := dot / nn
			factor[l] = append(factor[l], f)
			excess[l] = append(excess[l], (f-1)*(f-1)-variance(p[l]))
			boundVar += below(p[l]) / draws
			gotVar += (f - 1) * (f - 1) / draws
		}
	}
	for l := range spans {
		name := fs[0].js.Layers()[l]
		m, se := meanSE(factor[l])
		if se == 0 {
			// Exact at every step (p = 1, or K·p whole with balanced draws).
			if math.Abs(m-1) > 1e-9 {
				t.Errorf("layer %s: factor %.6f without spread, want 1", name, m)
			}
			continue
		}
		if math.Abs(m-1) > 4*se {
			t.Errorf("layer %s: mean factor %.4f ± %.4f, want 1", name, m, se)
		}
		if e, ese := meanSE(excess[l]); math.Abs(e) > 4*ese {
			t.Errorf("layer %s: squared deviation exceeds the expected by %.4f ± %.4f", name, e, ese)
		}
		for r := range K {
			if m, se := meanSE(drawn[r*L+l]); math.Abs(m) > 4*se+1e-12 {
				t.Errorf("layer %s: worker %d drew it %.4f ± %.4f more often than p", name, r, m, se)
			}
		}
	}
	t.Logf("summed variance of the factors: %.3f, against %.3f", gotVar, boundVar)
	if !(gotVar < boundVar/2) {
		t.Errorf("summed variance %.3f, not below half of %.3f", gotVar, boundVar)
	}
}

// TestBalancedExchange checks balanced draws' exchange exactly on 4
// workers that hold different batches, in-process and over TCP: each
// layer's update must be the sum of the gradients of the workers it was
// dealt to over K·p_ℓ, and the bytes sent those of the chunked exchange,
// size × (n − 1 + K − 1) for a layer of n holders.
func TestBalancedExchange(t *testing.T) {
	const K = 4
	t.Run("in-process", func(t *testing.T) { checkBalancedExchange(t, dist.NewLocal(K)) })
	t.Run("tcp", func(t *testing.T) { checkBalancedExchange(t, commtest.Loopback(t, K, false)) })
}

func checkBalancedExchange(t *testing.T, comms []dist.Comm) {
	K := len(comms)
	batch := func(r int) (x, y *tensor.Tensor) {
		l, err := dataset.NewLoader(bands(32, 3, uint64(10+r)), dataset.LoaderOptions{BatchSize: 32})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := l.Next()
		return b.X, b.Y
	}
	full := newFixture(t, "cnn", sparse.Options{Budget: 1})
	fs := make([]*fixture, K)
	grads := make([][]float64, K) // each worker's whole gradient
	for r := range fs {
		full.x, full.y = batch(r)
		grads[r], _, _ = full.estimate(t, 0)
		fs[r] = newFixtureOn(t, "cnn", sparse.Options{Budget: 0.5, Seed: 2, Balanced: true}, comms[r])
		fs[r].x, fs[r].y = full.x, full.y
	}
	onAll(t, K, func(r int) error { return fs[r].js.Setup(fs[r].sc) })
	spans := layerSpans(t, fs[0], len(grads[0]))
	gs := make([][]float64, K)
	var wantBytes int64
	for s := range 12 {
		onAll(t, K, func(r int) (err error) {
			gs[r], _, _, err = fs[r].step(s)
			return err
		})
		p := fs[0].js.Probabilities()
		for l, sp := range spans {
			var holders []int
			for r := range fs {
				if fs[r].js.Sampled()[l] {
					holders = append(holders, r)
				}
			}
			if len(holders) > 0 {
				wantBytes += int64(fs[0].params[0].Param.Value.DType().Size() * (sp[1] - sp[0]) * (len(holders) - 1 + K - 1))
			}
			for i := sp[0]; i < sp[1]; i++ {
				var want float64
				for _, r := range holders {
					want += grads[r][i]
				}
				want /= float64(K) * p[l]
				for r := range K {
					if d := math.Abs(gs[r][i] - want); d > 2e-6+1e-4*math.Abs(want) { // float32 parameters
						t.Fatalf("step %d, layer %d (held by %v), element %d: worker %d updated by %.12g, want %.12g", s, l, holders, i-sp[0], r, gs[r][i], want)
					}
				}
			}
		}
	}
	var sent int64
	for _, f := range fs {
		sent += f.js.CommStats().Sent
	}
	if sent != wantBytes {
		t.Errorf("the workers sent %d bytes in all, want %d", sent, wantBytes)
	}
	if dense := fs[0].js.CommStats().DataParallelBytes * int64(K); !(sent < dense) {
		t.Errorf("the workers sent %d bytes, no fewer than a dense all-reduce's %d", sent, dense)
	}
}

// TestSkipsWork checks that backward does less work with a smaller budget:
// unsampled layers get no gradient, and their weight gradients are not
// computed.
func TestSkipsWork(t *testing.T) {
	flops := map[float64]int64{}
	for _, budget := range []float64{0.25, 1} {
		f := newFixture(t, "resnet20", sparse.Options{Budget: budget, Seed: 1})
		var total int64
		for s := range 8 {
			_, m, n := f.estimate(t, s)
			if budget == 1 && slices.Contains(m, false) {
				t.Errorf("budget 1 left a layer out")
			}
			total += n
		}
		flops[budget] = total
	}
	// A quarter of the weight gradients (about half of backward) and the
	// input gradients below the lowest layer drawn: under 3/4 of the work.
	if !(flops[0.25] < flops[1]*3/4) {
		t.Errorf("8 backward passes took %d FLOPs at budget 0.25 and %d at 1", flops[0.25], flops[1])
	}
}

func smallConfig(opt string) train.Config {
	cfg := train.DefaultConfig()
	cfg.Model = "cnn"
	cfg.Epochs = 2
	cfg.BatchSize = 8
	cfg.Optimizer = opt
	cfg.LR = 0.05
	cfg.WarmupEpochs = 0.5
	cfg.LogEvery = 0
	return cfg
}

// trainK trains cfg on k in-process workers with the strategies mk makes
// and returns rank 0's parameters and strategy statistics.
func trainK(t *testing.T, cfg train.Config, data *dataset.Images, k int, mk func(c dist.Comm) train.Strategy, stop int, ckpt string) (map[string][]float32, train.CommStats) {
	t.Helper()
	var w map[string][]float32
	var st train.CommStats
	phase := func(resume bool, until int) {
		comms := dist.NewLocal(k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for r := range k {
			wg.Go(func() {
				s := mk(comms[r])
				defer func() {
					if c, ok := s.(interface{ Close() }); ok {
						c.Close()
					}
				}()
				opts := train.Options{Strategy: s, Rank: r, World: k}
				if ckpt != "" {
					opts.CheckpointComm, opts.CheckpointPath = comms[r], ckpt
				}
				tr, err := train.New(cfg, data, nil, opts)
				if err != nil {
					errs[r] = err
					return
				}
				defer tr.Close()
				if resume {
					if errs[r] = tr.LoadCheckpoint(ckpt); errs[r] != nil {
						comms[r].Close()
						return
					}
				}
				if _, errs[r] = tr.RunUntil(context.Background(), until); errs[r] != nil {
					comms[r].Close()
					return
				}
				if until < tr.TotalSteps() {
					errs[r] = tr.SaveCheckpoint(ckpt)
				}
				if r == 0 {
					w = map[string][]float32{}
					for _, p := range tr.Model().NamedParameters() {
						w[p.Name] = slices.Clone(p.Param.Value.Float32s())
					}
					if c, ok := s.(train.CommReporter); ok {
						st = c.CommStats()
					}
				}
			})
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	if stop > 0 {
		phase(false, stop)
		phase(true, math.MaxInt)
	} else {
		phase(false, math.MaxInt)
	}
	return w, st
}

func jointspar(opt sparse.Options) func(dist.Comm) train.Strategy {
	return func(c dist.Comm) train.Strategy {
		j, err := sparse.New(c, opt)
		if err != nil {
			panic(err)
		}
		return j
	}
}

// TestBudgetOne checks that with p ≡ 1 JointSpar is plain SGD or LARS:
// exactly on one worker, and data parallel (to rounding) on two.
func TestBudgetOne(t *testing.T) {
	data := bands(64, 1, 3)
	for _, opt := range []string{"sgd", "lars"} {
		cfg := smallConfig(opt)
		single, _ := trainK(t, cfg, data, 1, func(dist.Comm) train.Strategy { return train.SingleWorker{} }, 0, "")
		js, _ := trainK(t, cfg, data, 1, jointspar(sparse.Options{Budget: 1}), 0, "")
		if d := nntest.MaxDiff(single, js); d != 0 {
			t.Errorf("%s: JointSpar with budget 1 on one worker differs from plain training by %.3g", opt, d)
		}
		dp, _ := trainK(t, cfg, data, 2, func(c dist.Comm) train.Strategy { return train.NewDataParallel(c, train.DataParallelOptions{}) }, 0, "")
		for _, o := range []sparse.Options{{Budget: 1}, {Budget: 1, Balanced: true}} {
			js2, _ := trainK(t, cfg, data, 2, jointspar(o), 0, "")
			if d := nntest.MaxDiff(dp, js2); d > 1e-5 {
				t.Errorf("%s: JointSpar (balanced %v) with budget 1 on two workers differs from data parallel by %.3g", opt, o.Balanced, d)
			}
		}
	}
}

// TestBytesAndResume checks the bytes of the shared and per-worker draws
// and that a run resumed from a checkpoint equals the uninterrupted one.
func TestBytesAndResume(t *testing.T) {
	data := bands(64, 1, 4)
	cfg := smallConfig("lars")
	opt := sparse.Options{Budget: 0.5, Seed: 3}
	whole, st := trainK(t, cfg, data, 2, jointspar(opt), 0, "")
	if !(st.Sent > 0 && st.Sent < st.DataParallelBytes*3/4) || st.LayersPerStep <= 0 || st.LayersPerStep >= 4 {
		t.Errorf("budget 0.5: %+v; want fewer bytes than data parallel's and 0 < layers per step < 4", st)
	}
	_, dense := trainK(t, cfg, data, 2, jointspar(sparse.Options{Budget: 0.5, Seed: 3, PerWorker: true}), 0, "")
	if dense.Sent < dense.DataParallelBytes {
		t.Errorf("per-worker draws sent %d bytes, less than data parallel's %d: their all-reduce is dense", dense.Sent, dense.DataParallelBytes)
	}
	bal := sparse.Options{Budget: 0.5, Seed: 3, Balanced: true}
	wholeBal, sparseBal := trainK(t, cfg, data, 2, jointspar(bal), 0, "")
	if !(sparseBal.Sent > 0 && sparseBal.Sent < sparseBal.DataParallelBytes*3/4) {
		t.Errorf("balanced draws sent %d bytes, data parallel %d: want under 3/4", sparseBal.Sent, sparseBal.DataParallelBytes)
	}
	for _, c := range []struct {
		opt   sparse.Options
		whole map[string][]float32
		st    train.CommStats
	}{{opt, whole, st}, {bal, wholeBal, sparseBal}} {
		parts, pst := trainK(t, cfg, data, 2, jointspar(c.opt), 5, filepath.Join(t.TempDir(), "js.ckpt"))
		if d := nntest.MaxDiff(c.whole, parts); d != 0 {
			t.Errorf("balanced %v: resumed run differs by %.3g", c.opt.Balanced, d)
		}
		// The counts go on across the resume.
		if pst.Sent != c.st.Sent || pst.Received != c.st.Received || pst.Collectives != c.st.Collectives ||
			pst.Syncs != c.st.Syncs || pst.DataParallelBytes != c.st.DataParallelBytes || pst.LayersPerStep != c.st.LayersPerStep {
			t.Errorf("balanced %v: resumed run's counts %+v, uninterrupted %+v", c.opt.Balanced, pst, c.st)
		}
	}
}

// TestVarianceOnModel compares, on the CNN's and ResNet-20's real layer
// gradients, the estimator's variance with probabilities in proportion to
// the layer norms against uniform probabilities of the same budget.
func TestVarianceOnModel(t *testing.T) {
	for _, name := range []string{"cnn", "resnet20"} {
		f := newFixture(t, name, sparse.Options{Budget: 1})
		g, _, _ := f.estimate(t, 0)
		var norms []float64
		off := 0
		for _, layer := range f.js.Layers() {
			sq := 0.0
			for _, p := range f.params {
				if n := p.Param.Value.NumElements(); len(p.Name) > len(layer) && p.Name[:len(layer)+1] == layer+"." {
					for _, v := range g[off : off+n] {
						sq += v * v
					}
					off += n
				}
			}
			norms = append(norms, math.Sqrt(sq))
		}
		known := make([]bool, len(norms))
		uniform := make([]float64, len(norms))
		for i := range known {
			known[i], uniform[i] = true, 0.5
		}
		v := sparse.Variance(norms, sparse.Probabilities(norms, known, 0.5, 0.05))
		u := sparse.Variance(norms, uniform)
		if !(v <= u) {
			t.Errorf("%s: variance %.4g with p ∝ ‖g_ℓ‖, %.4g with uniform p", name, v, u)
		}
		t.Logf("%s: variance %.4g with p ∝ ‖g_ℓ‖, %.4g with uniform p (%d layers)", name, v, u, len(norms))
	}
}

// TestLARSScalesAdaptedOnly checks JointSpar-LARS's update of a drawn
// layer against LARS's full step on the same batch: the weights, whose
// update LARS adapts, move 1/p_ℓ times as far, and the biases, which LARS
// steps with the plain gradient, move as far — or 1/p_ℓ times as far too
// when LARS adapts every parameter (train.Config.LARSAdaptAll).
func TestLARSScalesAdaptedOnly(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("adapt all %v", all), func(t *testing.T) { checkLARSScales(t, all) })
	}
}

func checkLARSScales(t *testing.T, adaptAll bool) {
	withLARS := func(f *fixture) {
		vars := make([]*autograd.Var, len(f.params))
		names := make([]string, len(f.params))
		for i, p := range f.params {
			vars[i], names[i] = p.Param, p.Name
		}
		groups := optim.SplitForLARS(vars, names, 1, 0)
		groups[1].NoAdapt = !adaptAll
		f.sc.Optimizer = optim.NewLARS(groups, optim.LARSOptions{})
	}
	full := newFixture(t, "cnn", sparse.Options{Budget: 1})
	withLARS(full)
	want, _, _ := full.estimate(t, 0)
	f := newFixture(t, "cnn", sparse.Options{Budget: 0.5, PMin: 0.2, Seed: 4})
	withLARS(f)
	checked := map[bool]int{}
	for step := range 8 {
		got, drawn, _ := f.estimate(t, step)
		p := f.js.Probabilities()
		off := 0
		for _, np := range f.params {
			n := np.Param.Value.NumElements()
			l := slices.IndexFunc(f.js.Layers(), func(name string) bool { return strings.HasPrefix(np.Name, name+".") })
			scale := 0.0
			if drawn[l] {
				scale = 1.0
				if adaptAll || np.Param.Value.Dim() > 1 {
					scale = 1 / p[l]
				}
				checked[np.Param.Value.Dim() > 1]++
			}
			for k := off; k < off+n; k++ {
				// The displacements are differences of float32 values.
				if d := math.Abs(got[k] - scale*want[k]); d > 1e-2*math.Abs(scale*want[k])+1e-7 {
					t.Fatalf("step %d, %s (p %.3f, drawn %v): moved %.6g, want %.6g", step, np.Name, p[l], drawn[l], got[k], scale*want[k])
				}
			}
			off += n
		}
	}
	if checked[true] == 0 || checked[false] == 0 {
		t.Fatalf("no drawn weight or bias in 8 steps: %v", checked)
	}
}
