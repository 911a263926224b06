package train_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// averager is a Stateful strategy whose state feeds back into training, so
// that a resume that lost it (or the run's generator) would diverge: after
// every step it perturbs the first parameter with noise drawn from the
// run's generator, keeps an exponential average of it, and every third of
// its own steps pulls the parameter halfway to the average.
type averager struct {
	count int
	avg   *tensor.Tensor
}

func (a *averager) Setup(*train.StepContext) error         { return nil }
func (a *averager) AfterBackward(*train.StepContext) error { return nil }
func (a *averager) Close()                                 {}

func (a *averager) AfterStep(s *train.StepContext) error {
	p := s.Params[0].Param.Value
	noise := s.Generator.Normal(p.Shape(), 0, 1e-3)
	p.AddInPlace(noise)
	noise.Release()
	if a.avg == nil {
		a.avg = p.Clone()
	}
	a.avg.MulScalarInPlace(0.9)
	a.avg.AddScaledInPlace(0.1, p)
	a.count++
	if a.count%3 == 0 {
		p.MulScalarInPlace(0.5)
		p.AddScaledInPlace(0.5, a.avg)
	}
	return nil
}

func (a *averager) State() (map[string]*tensor.Tensor, map[string]string) {
	ts := map[string]*tensor.Tensor{}
	if a.avg != nil {
		ts["avg"] = a.avg.Clone()
	}
	return ts, map[string]string{"count": strconv.Itoa(a.count)}
}

func (a *averager) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	n, err := strconv.Atoi(sc["count"])
	if err != nil {
		return err
	}
	a.count = n
	if a.avg != nil {
		a.avg.Release()
		a.avg = nil
	}
	if t, ok := ts["avg"]; ok {
		a.avg = t.Clone()
	}
	return nil
}

// recorder collects the records of a run.
type recorder struct{ recs []train.Record }

func (r *recorder) add(rec train.Record) { r.recs = append(r.recs, rec) }

// same reports whether two records agree bit for bit in everything but the
// timings.
func same(a, b train.Record) bool {
	return a.Kind == b.Kind && a.Step == b.Step && a.Epoch == b.Epoch &&
		math.Float64bits(a.LR) == math.Float64bits(b.LR) &&
		math.Float64bits(a.Loss) == math.Float64bits(b.Loss) &&
		math.Float64bits(a.Acc) == math.Float64bits(b.Acc)
}

// weights returns a copy of the model's state dict values.
func weights(m nn.Module) map[string][]float32 {
	sd := nn.StateDict(m)
	defer nn.ReleaseAll(sd)
	out := map[string][]float32{}
	for k, v := range sd {
		out[k] = v.Float32s()
	}
	return out
}

func sameWeights(t *testing.T, a, b map[string][]float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d tensors vs %d", len(a), len(b))
	}
	for k, va := range a {
		vb := b[k]
		for i := range va {
			if math.Float32bits(va[i]) != math.Float32bits(vb[i]) {
				t.Fatalf("%s[%d] = %v, want %v", k, i, vb[i], va[i])
			}
		}
	}
}

// TestResumeExact runs each configuration straight through and, with fresh
// objects, in two parts joined by a checkpoint, and requires every record
// (step, epoch, lr, loss, acc) and the final weights to agree bit for bit.
func TestResumeExact(t *testing.T) {
	trainSet, testSet := synthetic(96, 3, 1), synthetic(40, 3, 2)
	cases := []struct {
		name      string
		optimizer string
		model     string
		logEvery  int
		stop      int
	}{
		{"sgd mid-epoch", "sgd", "mlp", 1, 8},
		{"sgd partial log interval", "sgd", "mlp", 4, 7},
		{"sgd epoch end", "sgd", "mlp", 4, 12},
		{"adamw", "adamw", "mlp", 1, 5},
		{"lars", "lars", "mlp", 2, 9},
		{"cnn", "sgd", "cnn", 1, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.Optimizer, cfg.Model, cfg.LogEvery = c.optimizer, c.model, c.logEvery
			if c.optimizer == "adamw" {
				cfg.LR, cfg.Nesterov = 0.01, false
			}
			ctx := context.Background()

			var straight recorder
			a, err := train.New(cfg, trainSet, testSet, train.Options{Strategy: &averager{}, OnRecord: straight.add})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			sumA, err := a.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}

			var parts recorder
			path := filepath.Join(t.TempDir(), "ckpt.safetensors")
			b, err := train.New(cfg, trainSet, testSet, train.Options{Strategy: &averager{}, OnRecord: parts.add})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.RunUntil(ctx, c.stop); err != nil {
				t.Fatal(err)
			}
			if err := b.SaveCheckpoint(path); err != nil {
				t.Fatal(err)
			}
			b.Close()

			r, err := train.New(cfg, trainSet, testSet, train.Options{Strategy: &averager{}, OnRecord: parts.add})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.LoadCheckpoint(path); err != nil {
				t.Fatal(err)
			}
			if r.Step() != c.stop {
				t.Fatalf("resumed at step %d, want %d", r.Step(), c.stop)
			}
			sumR, err := r.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}

			if len(parts.recs) != len(straight.recs) {
				t.Fatalf("%d records after resume, %d straight", len(parts.recs), len(straight.recs))
			}
			for i := range straight.recs {
				if !same(straight.recs[i], parts.recs[i]) {
					t.Fatalf("record %d: resumed %+v, straight %+v", i, parts.recs[i], straight.recs[i])
				}
			}
			sameWeights(t, weights(a.Model()), weights(r.Model()))
			if sumA.TrainLoss != sumR.TrainLoss || sumA.TestAcc != sumR.TestAcc || sumA.Steps != sumR.Steps || sumA.Images != sumR.Images {
				t.Errorf("summary after resume %+v, straight %+v", sumR, sumA)
			}
			// The run must have learnt something for the comparison to
			// mean anything.
			if first, last := straight.recs[0].Loss, sumA.TrainLoss; !(last < first) {
				t.Errorf("training loss went from %v to %v", first, last)
			}
		})
	}
}

// TestInterruptCheckpoint cancels a run mid-epoch and resumes it from the
// checkpoint written on the way out.
func TestInterruptCheckpoint(t *testing.T) {
	trainSet, testSet := synthetic(96, 3, 1), synthetic(40, 3, 2)
	cfg := tinyConfig()
	path := filepath.Join(t.TempDir(), "run.safetensors")

	var straight recorder
	a, err := train.New(cfg, trainSet, testSet, train.Options{OnRecord: straight.add})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	var parts recorder
	ctx, cancel := context.WithCancel(context.Background())
	b, err := train.New(cfg, trainSet, testSet, train.Options{
		CheckpointPath: path,
		OnRecord:       parts.add,
		OnProgress: func(p train.Progress) {
			if p.Step == 10 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Run(ctx)
	b.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run returned %v, want context.Canceled", err)
	}
	r, err := train.New(cfg, trainSet, testSet, train.Options{OnRecord: parts.add})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.LoadCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	if got := r.Position(); got != (dataset.Position{Epoch: 1, Batch: 4}) {
		t.Fatalf("resumed at %+v, want epoch 1 batch 4", got)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(parts.recs) != len(straight.recs) {
		t.Fatalf("%d records after resume, %d straight", len(parts.recs), len(straight.recs))
	}
	for i := range straight.recs {
		if !same(straight.recs[i], parts.recs[i]) {
			t.Fatalf("record %d: resumed %+v, straight %+v", i, parts.recs[i], straight.recs[i])
		}
	}
}

// badName is a strategy whose state has a name safetensors cannot store,
// which makes SaveCheckpoint fail after the write has begun.
type badName struct{ train.SingleWorker }

func (badName) State() (map[string]*tensor.Tensor, map[string]string) {
	return map[string]*tensor.Tensor{"\xff": tensor.Zeros(tensor.Shape{2})}, nil
}
func (badName) LoadState(map[string]*tensor.Tensor, map[string]string) error { return nil }

// TestCheckpointAtomic checks that a failed checkpoint write leaves the
// previous checkpoint in place, whole, and no temporary file behind.
func TestCheckpointAtomic(t *testing.T) {
	trainSet := synthetic(96, 3, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	good, err := train.New(tinyConfig(), trainSet, nil, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, err := good.RunUntil(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if err := good.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	bad, err := train.New(tinyConfig(), trainSet, nil, train.Options{Strategy: badName{}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.RunUntil(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	if err := bad.SaveCheckpoint(path); err == nil {
		t.Fatal("checkpoint with an invalid tensor name written")
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Error("failed write changed the existing checkpoint")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only the checkpoint", names)
	}

	r, err := train.New(tinyConfig(), trainSet, nil, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.LoadCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	if r.Step() != 3 {
		t.Errorf("checkpoint at step %d, want 3", r.Step())
	}
}

// checkpointAt trains tinyConfig on data for steps steps and saves a
// checkpoint at path; the trainer is closed when the test ends.
func checkpointAt(t *testing.T, data *dataset.Images, opts train.Options, steps int, path string) *train.Trainer {
	t.Helper()
	tr, err := train.New(tinyConfig(), data, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	if _, err := tr.RunUntil(context.Background(), steps); err != nil {
		t.Fatal(err)
	}
	if err := tr.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestLoadCheckpointMismatch loads checkpoints into runs they do not fit and
// checks for an error naming the problem, with the model left unchanged.
func TestLoadCheckpointMismatch(t *testing.T) {
	dir := t.TempDir()
	three, four := synthetic(96, 3, 1), synthetic(96, 4, 1)
	mlpPath := filepath.Join(dir, "mlp.safetensors")
	src := checkpointAt(t, three, train.Options{}, 2, mlpPath)
	plainPath := filepath.Join(dir, "weights.safetensors")
	if err := nn.Save(plainPath, src.Model()); err != nil {
		t.Fatal(err)
	}
	twoPath := filepath.Join(dir, "two-workers.safetensors")
	checkpointAt(t, three, train.Options{World: 2}, 2, twoPath)

	cnn := tinyConfig()
	cnn.Model = "cnn"
	bigBatch := tinyConfig()
	bigBatch.BatchSize = 32
	cases := []struct {
		name string
		cfg  train.Config
		data *dataset.Images
		path string
		want []string
	}{
		{"other model", cnn, three, mlpPath, []string{`"mlp" model`, `"cnn"`, "missing keys", "unexpected keys"}},
		{"other number of classes", tinyConfig(), four, mlpPath, []string{"does not match", "shape mismatch", "[3 256]", "[4 256]"}},
		{"other batch size", bigBatch, three, mlpPath, []string{"batch size 16 and 6 steps per epoch", "batch size 32 and 3 steps per epoch"}},
		{"other number of workers", tinyConfig(), three, twoPath, []string{"written by a run of 2 workers, this run has 1"}},
		{"not a training checkpoint", tinyConfig(), three, plainPath, []string{"not a flock training checkpoint"}},
		{"no file", tinyConfig(), three, filepath.Join(dir, "none.safetensors"), []string{"no such file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := train.New(c.cfg, c.data, nil, train.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			before := weights(tr.Model())
			err = tr.LoadCheckpoint(c.path)
			if err == nil {
				t.Fatal("mismatched checkpoint loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			sameWeights(t, before, weights(tr.Model()))
			if tr.Step() != 0 {
				t.Errorf("step %d after a failed load", tr.Step())
			}
		})
	}
}

// TestCheckpointContents checks the metadata a checkpoint carries.
func TestCheckpointContents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.safetensors")
	tr, err := train.New(tinyConfig(), synthetic(96, 3, 1), nil, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.RunUntil(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	if err := tr.SaveCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"step": "8", "epoch": "1", "batch": "2", "optim.step": "8"} {
		if got := f.Metadata[k]; got != want {
			t.Errorf("metadata %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"rng.seed", "rng.offset", "config"} {
		if f.Metadata[k] == "" {
			t.Errorf("metadata %s missing", k)
		}
	}
	for _, name := range nn.StateKeys(tr.Model()) {
		if _, ok := f.Tensors["model."+name]; !ok {
			t.Errorf("tensor model.%s missing", name)
		}
		if _, ok := f.Tensors["optim."+name+".momentum_buffer"]; !ok {
			t.Errorf("tensor optim.%s.momentum_buffer missing", name)
		}
	}
	cfg, err := train.ReadCheckpointConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(cfg)
	want, _ := json.Marshal(tr.Config())
	if string(got) != string(want) {
		t.Errorf("stored config %s, want %s", got, want)
	}
}

// hookLog records the calls a Strategy receives.
type hookLog struct {
	t     *testing.T
	calls []string
	prev  []float32
	fail  int
}

func (h *hookLog) Close() {}

func (h *hookLog) Setup(s *train.StepContext) error {
	h.calls = append(h.calls, fmt.Sprintf("setup %d", s.Step))
	return nil
}

func (h *hookLog) AfterBackward(s *train.StepContext) error {
	h.calls = append(h.calls, fmt.Sprintf("backward %d e%d b%d lr=%v", s.Step, s.Epoch, s.Batch, s.LR))
	for _, p := range s.Params {
		if p.Param.Grad() == nil {
			h.t.Errorf("step %d: %s has no gradient after backward", s.Step, p.Name)
		}
	}
	h.prev = s.Params[0].Param.Value.Float32s()
	return nil
}

func (h *hookLog) AfterStep(s *train.StepContext) error {
	h.calls = append(h.calls, fmt.Sprintf("step %d lr=%v next=%v", s.Step, s.LR, s.LRAt(s.Step+1)))
	if slices.Equal(h.prev, s.Params[0].Param.Value.Float32s()) {
		h.t.Errorf("step %d: parameters unchanged after the optimizer step", s.Step)
	}
	if s.Step == h.fail {
		return errors.New("peer lost")
	}
	return nil
}

// TestStrategyHooks checks that a Strategy is set up once and then called
// after backward (gradients present) and after the optimizer step
// (parameters updated), in order, with each step's index, position and
// learning rate, and that a hook's error stops the run.
func TestStrategyHooks(t *testing.T) {
	cfg := tinyConfig()
	cfg.Epochs = 2
	h := &hookLog{t: t, fail: -1}
	tr, err := train.New(cfg, synthetic(96, 3, 1), nil, train.Options{Strategy: h})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sched := tr.Schedule()
	want := []string{"setup 0"}
	for s := range tr.TotalSteps() {
		want = append(want,
			fmt.Sprintf("backward %d e%d b%d lr=%v", s, s/6, s%6, sched.LR(s)),
			fmt.Sprintf("step %d lr=%v next=%v", s, sched.LR(s), sched.LR(s+1)))
	}
	if !slices.Equal(h.calls, want) {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(h.calls, "\n"), strings.Join(want, "\n"))
	}
	// The warm-up of half an epoch (3 steps) starts at 0.1·η.
	if got, want := sched.LR(0), 0.1*cfg.LR; math.Abs(got-want) > 1e-12 {
		t.Errorf("first learning rate %v, want %v", got, want)
	}

	h = &hookLog{t: t, fail: 4}
	tr2, err := train.New(cfg, synthetic(96, 3, 1), nil, train.Options{Strategy: h})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	_, err = tr2.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "peer lost") || !strings.Contains(err.Error(), "step 4") {
		t.Errorf("failing hook gave %v", err)
	}
	if tr2.Step() != 4 {
		t.Errorf("run stopped after step %d, want 4", tr2.Step())
	}
}

// TestEvaluate checks that evaluation leaves the model, its mode and the
// run's generator alone, and matches a loss computed independently.
func TestEvaluate(t *testing.T) {
	testSet := synthetic(40, 3, 2)
	tr, err := train.New(tinyConfig(), synthetic(96, 3, 1), testSet, train.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, err := tr.RunUntil(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	before := weights(tr.Model())
	loss, acc := tr.Evaluate()
	loss2, acc2 := tr.Evaluate()
	if loss != loss2 || acc != acc2 {
		t.Errorf("two evaluations differ: (%v, %v), (%v, %v)", loss, acc, loss2, acc2)
	}
	if !tr.Model().Training() {
		t.Error("model left in evaluation mode")
	}
	sameWeights(t, before, weights(tr.Model()))

	// An independent float64 reference: logits of the whole test set at once.
	l, err := dataset.NewLoader(testSet, dataset.LoaderOptions{BatchSize: testSet.N})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := l.Next()
	defer b.Release()
	logits := forward(tr.Model(), b.X)
	defer logits.Release()
	rows := logits.Shape()[0]
	vals, labels := logits.Float32s(), b.Y.Int64s()
	var sum float64
	var correct int
	for i := range rows {
		row := vals[i*3 : i*3+3]
		m := math.Inf(-1)
		best := 0
		for j, v := range row {
			if float64(v) > m {
				m, best = float64(v), j
			}
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - m)
		}
		sum += m + math.Log(z) - float64(row[labels[i]])
		if int64(best) == labels[i] {
			correct++
		}
	}
	if want := sum / float64(rows); math.Abs(loss-want) > 1e-5*max(1, want) {
		t.Errorf("test loss %v, want %v", loss, want)
	}
	if want := float64(correct) / float64(rows); acc != want {
		t.Errorf("test accuracy %v, want %v", acc, want)
	}
}

// TestConfigValidate checks that each bad setting is refused, naming it.
func TestConfigValidate(t *testing.T) {
	if err := train.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cases := []struct {
		name string
		edit func(*train.Config)
		want string
	}{
		{"model", func(c *train.Config) { c.Model = "resnet" }, "unknown model"},
		{"epochs", func(c *train.Config) { c.Epochs = -1 }, "epochs -1"},
		{"batch", func(c *train.Config) { c.BatchSize = 0 }, "batch size 0"},
		{"lr zero", func(c *train.Config) { c.LR = 0 }, "lr 0"},
		{"lr nan", func(c *train.Config) { c.LR = math.NaN() }, "lr NaN"},
		{"optimizer", func(c *train.Config) { c.Optimizer = "rmsprop" }, "unknown optimizer"},
		{"momentum", func(c *train.Config) { c.Momentum = 1 }, "momentum 1"},
		{"nesterov", func(c *train.Config) { c.Momentum = 0 }, "nesterov needs momentum"},
		{"decay", func(c *train.Config) { c.WeightDecay = -1 }, "weight decay -1"},
		{"schedule", func(c *train.Config) { c.Schedule = "exp" }, "unknown schedule"},
		{"warmup", func(c *train.Config) { c.WarmupEpochs = float64(c.Epochs) }, "warm-up 10 epochs"},
		{"smoothing", func(c *train.Config) { c.LabelSmoothing = 1 }, "label smoothing 1"},
		{"eval", func(c *train.Config) { c.EvalEvery = -2 }, "eval every -2"},
		{"log", func(c *train.Config) { c.LogEvery = -1 }, "log every -1"},
		{"train images", func(c *train.Config) { c.TrainImages = -5 }, "train images -5"},
		{"stem", func(c *train.Config) { c.Stem = "resnet" }, `unknown stem "resnet"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := train.DefaultConfig()
			c.edit(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

// TestStem checks that Config.Stem reaches the model: an 8×8 image gets the
// small stem by default and torchvision's with "imagenet".
func TestStem(t *testing.T) {
	trainSet := synthetic(32, 3, 1)
	for _, c := range []struct {
		stem    string
		maxPool bool
	}{{"", false}, {"auto", false}, {"cifar", false}, {"imagenet", true}} {
		cfg := tinyConfig()
		cfg.Model, cfg.Stem = "resnet18", c.stem
		tr, err := train.New(cfg, trainSet, nil, train.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r := tr.Model().(*models.ResNet); (r.MaxPool != nil) != c.maxPool {
			t.Errorf("stem %q: max-pool %v, want %v", c.stem, r.MaxPool != nil, c.maxPool)
		}
		tr.Close()
	}
}

// TestTrainImages checks that a run restricted to the first images of the
// training set has the steps of that many images.
func TestTrainImages(t *testing.T) {
	trainSet, testSet := synthetic(96, 3, 1), synthetic(40, 3, 2)
	for _, c := range []struct{ images, steps int }{{0, 6}, {48, 3}, {200, 6}} {
		cfg := tinyConfig()
		cfg.TrainImages = c.images
		tr, err := train.New(cfg, trainSet, testSet, train.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.StepsPerEpoch(); got != c.steps {
			t.Errorf("TrainImages %d: %d steps per epoch, want %d", c.images, got, c.steps)
		}
		tr.Close()
	}
}

// TestValImages checks that a run holding out validation images trains on
// the others and evaluates on those held out: it is the run of the head
// of the training set evaluated on its tail.
func TestValImages(t *testing.T) {
	trainSet, testSet := synthetic(96, 3, 1), synthetic(40, 3, 2)
	cfg := tinyConfig()
	cfg.ValImages = 32
	if got := cfg.TrainImagesOf(trainSet.N); got != 64 {
		t.Errorf("TrainImagesOf(96) with 32 held out: %d, want 64", got)
	}
	run := func(cfg train.Config, trainSet, testSet *dataset.Images) (loss, acc float64, steps int) {
		tr, err := train.New(cfg, trainSet, testSet, train.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if _, err := tr.RunUntil(context.Background(), 5); err != nil {
			t.Fatal(err)
		}
		loss, acc = tr.Evaluate()
		return loss, acc, tr.StepsPerEpoch()
	}
	loss, acc, steps := run(cfg, trainSet, testSet)
	ref := tinyConfig()
	wantLoss, wantAcc, wantSteps := run(ref, trainSet.Head(64), trainSet.Tail(32))
	if loss != wantLoss || acc != wantAcc || steps != wantSteps || steps != 4 {
		t.Errorf("held out: loss %v acc %v, %d steps per epoch; head trained, tail evaluated: %v %v, %d (want 4)", loss, acc, steps, wantLoss, wantAcc, wantSteps)
	}
	if testLoss, _, _ := run(ref, trainSet.Head(64), testSet); testLoss == loss {
		t.Errorf("the run evaluated on the test set (loss %v)", loss)
	}
	cfg.ValImages = 96
	if _, err := train.New(cfg, trainSet, testSet, train.Options{}); err == nil || !strings.Contains(err.Error(), "validation") {
		t.Errorf("all images held out: err %v, want one naming the validation images", err)
	}
}

// TestDiverged runs with a learning rate that makes the loss NaN after the
// first step:
// by default the run stops with ErrDiverged after
// DefaultMaxNonFiniteSteps such steps; with a negative limit it goes on to
// the end, its records holding the non-finite losses.
func TestDiverged(t *testing.T) {
	cfg := tinyConfig()
	cfg.LR, cfg.WarmupEpochs = 1e30, 0
	for _, tt := range []struct {
		name  string
		limit int
		steps int // steps taken: the first loss, before any update, is finite; 18 is the whole run
	}{
		{"default", 0, 1 + train.DefaultMaxNonFiniteSteps},
		{"three", 3, 4},
		{"keep going", -1, 18},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var rec recorder
			tr, err := train.New(cfg, synthetic(96, 3, 1), nil, train.Options{MaxNonFiniteSteps: tt.limit, OnRecord: rec.add})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			_, err = tr.Run(context.Background())
			if tt.limit >= 0 && !errors.Is(err, train.ErrDiverged) || tt.limit < 0 && err != nil {
				t.Fatalf("run: %v", err)
			}
			if tr.Step() != tt.steps {
				t.Errorf("stopped after %d steps, want %d", tr.Step(), tt.steps)
			}
			last := rec.recs[len(rec.recs)-1]
			if !math.IsNaN(last.Loss) && !math.IsInf(last.Loss, 0) {
				t.Errorf("last record's loss %v, want NaN or ±Inf", last.Loss)
			}
		})
	}
}

// TestLARSAdaptAll checks that Config.LARSAdaptAll reaches LARS: the
// biases step with the plain gradient by default and with their own trust
// ratios when it is set, and that it is refused without LARS.
func TestLARSAdaptAll(t *testing.T) {
	trainSet := synthetic(32, 1, 1)
	for _, all := range []bool{false, true} {
		cfg := tinyConfig()
		cfg.Optimizer, cfg.LARSAdaptAll = "lars", all
		tr, err := train.New(cfg, trainSet, nil, train.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ad := tr.Optimizer().(optim.Adaptive)
		for _, p := range tr.Model().NamedParameters() {
			want := all || p.Param.Value.Dim() > 1
			if got := ad.Adapts(p.Param); got != want {
				t.Errorf("LARSAdaptAll %v: %s adapts %v, want %v", all, p.Name, got, want)
			}
		}
	}
	cfg := train.DefaultConfig()
	cfg.LARSAdaptAll = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "lars-adapt-all needs the lars optimizer") {
		t.Errorf("LARSAdaptAll with %s: Validate() = %v", cfg.Optimizer, err)
	}
}
