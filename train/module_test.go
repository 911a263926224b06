package train_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// regressor is a model written outside nn/models: a two-layer perceptron
// from 3 features to 1 value.
type regressor struct {
	nn.Base
	hidden, out *nn.Linear
}

func newRegressor(g *tensor.Generator) *regressor {
	r := &regressor{hidden: nn.NewLinear(3, 16, true, g), out: nn.NewLinear(16, 1, true, g)}
	r.RegisterModule("hidden", r.hidden)
	r.RegisterModule("out", r.out)
	return r
}

func (r *regressor) Forward(x *autograd.Var) *autograd.Var {
	h := r.hidden.Forward(x)
	a := autograd.Tanh(h)
	h.Release()
	defer a.Release()
	return r.out.Forward(a)
}

// samples returns n points x ∈ [−1, 1]³ with targets y = sin(x₀) + x₁·x₂,
// [n, 3] and [n, 1].
func samples(n int, seed uint64) (x, y *tensor.Tensor) {
	g := tensor.NewGenerator(seed)
	x = g.Uniform(tensor.Shape{n, 3}, -1, 1)
	xs := x.Float32s()
	ys := make([]float32, n)
	for i := range ys {
		ys[i] = float32(math.Sin(float64(xs[3*i])) + float64(xs[3*i+1]*xs[3*i+2]))
	}
	return x, tensor.FromSlice(ys, tensor.Shape{n, 1})
}

func regressionConfig() train.Config {
	cfg := train.DefaultConfig()
	cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.LR, cfg.LogEvery, cfg.WarmupEpochs = "regressor", 6, 32, 0.1, 1, 0
	return cfg
}

// newRegression builds the Trainer of a regressor over 512 training and
// 128 test samples for rank r of world.
func newRegression(t *testing.T, cfg train.Config, opts train.Options) *train.Trainer {
	t.Helper()
	x, y := samples(512, 1)
	defer x.Release()
	defer y.Release()
	tx, ty := samples(128, 2)
	defer tx.Release()
	defer ty.Release()
	data, err := train.NewTensorData(x, y, dataset.LoaderOptions{BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed, Rank: opts.Rank, World: opts.World})
	if err != nil {
		t.Fatal(err)
	}
	test, err := train.NewTensorData(tx, ty, dataset.LoaderOptions{BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { data.Close(); test.Close() })
	tr, err := train.NewModule(cfg, newRegressor(tensor.NewGenerator(cfg.Seed)), train.Regression{}, data, test, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestModuleRegression trains a user's regression model with NewModule:
// the test loss falls far below the variance of the targets, records
// carry no accuracy, and a run stopped at a checkpoint and resumed logs
// the losses of an uninterrupted one.
func TestModuleRegression(t *testing.T) {
	cfg := regressionConfig()
	var whole recorder
	tr := newRegression(t, cfg, train.Options{OnRecord: whole.add})
	before, _ := tr.Evaluate()
	sum, err := tr.Run(context.Background())
	tr.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("test loss %v from %v, %d records", sum.TestLoss, before, len(whole.recs))
	if !(sum.TestLoss < before/4) || !math.IsNaN(sum.TestAcc) || !math.IsNaN(sum.TrainAcc) {
		t.Errorf("test loss %v from %v, accuracies %v and %v: want a quarter of it and no accuracy", sum.TestLoss, before, sum.TestAcc, sum.TrainAcc)
	}

	path := filepath.Join(t.TempDir(), "regression.ckpt")
	var parts recorder
	first := newRegression(t, cfg, train.Options{OnRecord: parts.add, CheckpointPath: path})
	if _, err := first.RunUntil(context.Background(), 40); err != nil {
		t.Fatal(err)
	}
	if err := first.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	first.Close()
	second := newRegression(t, cfg, train.Options{OnRecord: parts.add})
	defer second.Close()
	if err := second.LoadCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	lossesOf := func(r recorder) []float64 {
		var out []float64
		for _, rec := range r.recs {
			out = append(out, rec.Loss)
		}
		return out
	}
	if a, b := lossesOf(whole), lossesOf(parts); !slices.Equal(a, b) {
		t.Errorf("resumed run's losses %v, uninterrupted %v", b, a)
	}
}

// TestModuleLocalQSR trains the user's model with Local SGD under QSR on 4
// in-process workers: they synchronize, and end with the same parameters.
func TestModuleLocalQSR(t *testing.T) {
	cfg := regressionConfig()
	const k = 4
	comms := dist.NewLocal(k)
	params := make([]map[string][]float32, k)
	syncs := make([]int64, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r := range k {
		wg.Go(func() {
			s, err := localopt.NewLocal(comms[r], localopt.Options{Schedule: localopt.QSR(0.05, 2)})
			if err != nil {
				errs[r] = err
				return
			}
			defer s.Close()
			tr := newRegression(t, cfg, train.Options{Strategy: s, Rank: r, World: k})
			defer tr.Close()
			if _, errs[r] = tr.Run(context.Background()); errs[r] != nil {
				comms[r].Close()
				return
			}
			params[r] = weights(tr.Model())
			syncs[r] = s.CommStats().Syncs
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := 1; r < k; r++ {
		for name, w := range params[0] {
			if !slices.Equal(w, params[r][name]) {
				t.Fatalf("rank %d's %s differs from rank 0's after the last synchronization", r, name)
			}
		}
	}
	t.Logf("%d synchronizations", syncs[0])
	if syncs[0] == 0 || syncs[0] >= int64(6*4) {
		t.Errorf("%d synchronizations in 24 steps: want some, fewer than the steps", syncs[0])
	}
}

// TestTensorData checks the batches of samples in memory: each rank's
// share of an epoch is disjoint from the others', the order is the
// dataset's permutation, and a seek returns the batch a pass reached.
func TestTensorData(t *testing.T) {
	x := tensor.FromSlice([]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, tensor.Shape{10, 1})
	y := tensor.FromSlice([]int64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}, tensor.Shape{10})
	defer x.Release()
	defer y.Release()
	seen := map[int]int{}
	for r := range 2 {
		d, err := train.NewTensorData(x, y, dataset.LoaderOptions{BatchSize: 2, Shuffle: true, Seed: 4, Rank: r, World: 2})
		if err != nil {
			t.Fatal(err)
		}
		if d.Len() != 5 || d.BatchesPerEpoch() != 3 {
			t.Fatalf("rank %d: %d samples in %d batches, want 5 in 3", r, d.Len(), d.BatchesPerEpoch())
		}
		perm := dataset.Permutation(10, 4, 0)
		k := r
		for {
			b, err := d.Next(context.Background())
			if err != nil {
				break
			}
			for i, v := range b.X.Float32s() {
				if int(v) != perm[k] || b.Y.Int64s()[i] != int64(10*perm[k]) {
					t.Fatalf("rank %d: sample %v (target %v), want %d", r, v, b.Y.Int64s()[i], perm[k])
				}
				seen[int(v)]++
				k += 2
			}
			b.Release()
		}
		if err := d.Seek(dataset.Position{Epoch: 1, Batch: 1}); err != nil {
			t.Fatal(err)
		}
		b, _ := d.Next(context.Background())
		if want := dataset.Permutation(10, 4, 1)[r+4]; int(b.X.Float32s()[0]) != want {
			t.Errorf("rank %d after a seek: sample %v, want %d", r, b.X.Float32s()[0], want)
		}
		b.Release()
		d.Close()
	}
	if len(seen) != 10 {
		t.Errorf("the ranks visited %d distinct samples of 10 in an epoch", len(seen))
	}
}
