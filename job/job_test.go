package job_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/job"
	_ "github.com/flockml/flock/localopt"
	"github.com/flockml/flock/train"
)

// bands returns n noisy 8×8 grey images in 3 classes: the image of class c
// is bright in rows [2c, 2c+2).
func bands(n int, seed uint64) *dataset.Images {
	r := rand.New(rand.NewPCG(seed, 0))
	m := &dataset.Images{N: n, H: 8, W: 8, C: 1, Pixels: make([]uint8, n*64), Labels: make([]int32, n), Classes: []string{"a", "b", "c"}}
	for i := range n {
		c := r.IntN(3)
		m.Labels[i] = int32(c)
		for p, img := 0, m.Image(i); p < len(img); p++ {
			v := r.IntN(96)
			if p/8/2 == c {
				v += 128
			}
			img[p] = uint8(v)
		}
	}
	return m
}

func config(strategy string) train.Config {
	cfg := train.DefaultConfig()
	cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.LR, cfg.LogEvery = "mlp", 2, 16, 0.05, 1
	cfg.Strategy = train.StrategyConfig{Name: strategy}
	return cfg
}

// spec is a job of k in-process workers on 192 training and 60 test
// images.
func spec(cfg train.Config, k int) job.Spec {
	trainSet, testSet := bands(192, 1), bands(60, 2)
	return job.Spec{
		Config: cfg, Comms: dist.NewLocal(k), StepsPerEpoch: cfg.StepsPerEpoch(trainSet.N, k), Test: true,
		Build: func(cfg train.Config, withTest bool, opts train.Options) (*train.Trainer, func(), error) {
			test := testSet
			if !withTest {
				test = nil
			}
			t, err := train.New(cfg, trainSet, test, opts)
			return t, func() {}, err
		},
	}
}

// TestRun trains Local SGD on 4 in-process workers and checks the typed
// result: rank 0's summary with the whole job's throughput and its
// strategy's counts, and the records rank 0 reported.
func TestRun(t *testing.T) {
	s := spec(config("local"), 4)
	var trains, syncs atomic.Int64
	var started string
	s.OnRecord = func(r train.Record) {
		switch r.Kind {
		case train.KindTrain:
			trains.Add(1)
		case train.KindSync:
			syncs.Add(1)
		}
	}
	s.OnStart = func(_ *train.Trainer, st train.Strategy) { started = st.(interface{ String() string }).String() }
	res, err := job.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Rank0 || res.World != 4 || res.Interrupted || res.Step != res.TotalSteps || res.TotalSteps != 6 {
		t.Errorf("result %+v: want rank 0's, 4 workers, the 6 steps done", res)
	}
	sum := res.Summary
	if !sum.Evaluated || !(sum.TestAcc > 0.5) || sum.Comm == nil || sum.Comm.Syncs == 0 || int64(sum.Comm.Syncs) != syncs.Load() {
		t.Errorf("summary %+v (comm %+v), %d sync records: want an evaluation better than chance and every synchronization recorded", sum, sum.Comm, syncs.Load())
	}
	if trains.Load() != 6 || !strings.HasPrefix(started, "Local SGD") {
		t.Errorf("%d training records, strategy %q at the start", trains.Load(), started)
	}
}

// failing runs fault at rank 1's third step.
type failing struct {
	train.Strategy
	fault func() error
}

var errBroken = errors.New("broken on purpose")

func (f failing) AfterStep(s *train.StepContext) error {
	if s.Step == 2 {
		return f.fault()
	}
	return f.Strategy.AfterStep(s)
}

// runFailing runs a two-worker data-parallel job whose rank 1 meets fault
// at its third step.
func runFailing(fault func() error) (job.Result, error) {
	s := spec(config("dp"), 2)
	build := s.Build
	s.Build = func(cfg train.Config, withTest bool, opts train.Options) (*train.Trainer, func(), error) {
		if opts.Rank == 1 {
			opts.Strategy = failing{opts.Strategy, fault}
		}
		return build(cfg, withTest, opts)
	}
	return job.Run(context.Background(), s)
}

// TestRunFailure checks that a worker's failure stops the others and is
// returned, naming its rank, as the job's error.
func TestRunFailure(t *testing.T) {
	res, err := runFailing(func() error { return errBroken })
	var we *job.WorkerError
	if !errors.As(err, &we) || we.Rank != 1 || !errors.Is(err, errBroken) || !strings.Contains(err.Error(), "rank 1 of 2") {
		t.Errorf("error %v: want rank 1's failure", err)
	}
	if res.Interrupted || res.Checkpointed {
		t.Errorf("result %+v: a failure taken for an interruption", res)
	}
}

// TestRunOutOfMemory: a worker that runs out of device memory (which the
// tensor layer reports by a panic with an error) ends the job with an
// error naming its rank and the allocation, not a panic.
func TestRunOutOfMemory(t *testing.T) {
	_, err := runFailing(func() error {
		panic(fmt.Errorf("tensor: add(float32[1024 1024]@cuda:0): allocating 4.0 MiB, 139.0 GiB allocated already, 0 B free of 139.0 GiB: %w", backend.ErrOutOfMemory))
	})
	var we *job.WorkerError
	if !errors.As(err, &we) || we.Rank != 1 || !errors.Is(err, backend.ErrOutOfMemory) || !strings.Contains(err.Error(), "allocating 4.0 MiB") {
		t.Errorf("error %v: want rank 1's out of memory, naming the allocation", err)
	}
}

// TestRunStopAfter stops a Local SGD job of checkpoint sets mid-run and
// resumes it: the resumed job ends where an uninterrupted one does.
func TestRunStopAfter(t *testing.T) {
	whole, err := job.Run(context.Background(), spec(config("local"), 2))
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoint's directory does not exist yet: Run makes it.
	ckpt := filepath.Join(t.TempDir(), "new", "dir", "run.ckpt")
	first := spec(config("local"), 2)
	first.Checkpoint, first.StopAfter = ckpt, 5
	part, err := job.Run(context.Background(), first)
	if err != nil || part.Step != 5 {
		t.Fatalf("first part: step %d, %v", part.Step, err)
	}
	second := spec(config("local"), 2)
	second.Resume = ckpt
	rest, err := job.Run(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	if rest.Summary.TestLoss != whole.Summary.TestLoss || rest.Summary.TrainLoss != whole.Summary.TrainLoss || rest.Step != whole.Step {
		t.Errorf("resumed job: test loss %v, train loss %v at step %d; uninterrupted %v, %v at %d",
			rest.Summary.TestLoss, rest.Summary.TrainLoss, rest.Step, whole.Summary.TestLoss, whole.Summary.TrainLoss, whole.Step)
	}
}
