package train_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// runWorkers trains cfg on k in-process ranks over comms, rank r with the
// strategy made by strategy(r, comm) (nil: train.NewDataParallel with
// opts), and returns each rank's final weights and Run error. Before Run,
// ranks other than 0 perturb their weights, which Setup's broadcast must
// undo.
func runWorkers(t *testing.T, cfgs []train.Config, data *dataset.Images, comms []dist.Comm, opts train.DataParallelOptions,
	strategy func(r int, dp *train.DataParallel) train.Strategy) ([]map[string][]float32, []error) {
	t.Helper()
	k := len(comms)
	ws := make([]map[string][]float32, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r := range k {
		wg.Go(func() {
			dp := train.NewDataParallel(comms[r], opts)
			defer dp.Close()
			var s train.Strategy = dp
			if strategy != nil {
				s = strategy(r, dp)
			}
			tr, err := train.New(cfgs[r], data, nil, train.Options{Strategy: s, Rank: r, World: k})
			if err != nil {
				errs[r] = err
				comms[r].Close()
				return
			}
			defer tr.Close()
			if r > 0 {
				g := tensor.NewGenerator(uint64(100 + r))
				for _, p := range tr.Model().NamedParameters() {
					noise := g.Normal(p.Param.Value.Shape(), 0, 0.1)
					p.Param.Value.AddInPlace(noise)
					noise.Release()
				}
			}
			if _, errs[r] = tr.Run(context.Background()); errs[r] != nil {
				comms[r].Close()
			}
			ws[r] = weights(tr.Model())
		})
	}
	wg.Wait()
	for _, c := range comms {
		c.Close()
	}
	return ws, errs
}

func repeat(cfg train.Config, k int) []train.Config {
	cfgs := make([]train.Config, k)
	for i := range cfgs {
		cfgs[i] = cfg
	}
	return cfgs
}

// TestDataParallelEquivalence checks that K data-parallel workers with
// batch b end with the parameters of one worker with batch K·b, that every
// rank ends with the same parameters, and that Setup's broadcast undid the
// perturbation of the other ranks' initial weights.
func TestDataParallelEquivalence(t *testing.T) {
	tests := []struct {
		name        string
		model       string
		k, batch    int
		bucketBytes int
		optimizer   string
	}{
		{"mlp/K=2", "mlp", 2, 8, 0, "sgd"},
		{"mlp/K=4", "mlp", 4, 6, 0, "sgd"},
		{"mlp/K=2/small buckets", "mlp", 2, 8, 4096, "sgd"},
		{"cnn/K=2/one param per bucket", "cnn", 2, 8, 1, "sgd"},
		{"cnn/K=4/adamw", "cnn", 4, 4, 16 << 10, "adamw"},
		{"mlp/K=1", "mlp", 1, 16, 0, "sgd"},
	}
	data := synthetic(96, 4, 7)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tinyConfig()
			cfg.Model = tt.model
			cfg.Epochs = 2
			cfg.Optimizer = tt.optimizer
			if tt.optimizer == "adamw" {
				cfg.LR = 1e-3
			}

			one := cfg
			one.BatchSize = tt.k * tt.batch
			tr, err := train.New(one, data, nil, train.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := weights(tr.Model())
			steps := tr.Step()
			tr.Close()

			cfg.BatchSize = tt.batch
			ws, errs := runWorkers(t, repeat(cfg, tt.k), data, dist.NewLocal(tt.k), train.DataParallelOptions{BucketBytes: tt.bucketBytes}, nil)
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r := 1; r < tt.k; r++ {
				closeWeights(t, fmt.Sprintf("rank 0 vs rank %d", r), ws[0], ws[r], 0, 0)
			}
			closeWeights(t, "data parallel vs one worker", want, ws[0], 1e-5, 1e-6)
			if steps != 2*96/(tt.k*tt.batch) {
				t.Errorf("%d steps, want %d", steps, 2*96/(tt.k*tt.batch))
			}
		})
	}
}

// TestDataParallelOnCommDevice checks that data parallel hands a Comm that
// claims a device of its own (as NCCL's claim their GPU) its buckets, its
// model check and its broadcasts on that device — the wrapper panics on
// any other operand — while the model stays on its own device, and that
// the copies between the two leave the run exactly as on a host Comm.
func TestDataParallelOnCommDevice(t *testing.T) {
	t.Parallel()
	data := synthetic(64, 4, 7)
	cfg := tinyConfig()
	cfg.Model = "cnn"
	cfg.BatchSize = 8
	opts := train.DataParallelOptions{BucketBytes: 4096}
	want, errs := runWorkers(t, repeat(cfg, 2), data, dist.NewLocal(2), opts, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("host Comm: rank %d: %v", r, err)
		}
	}
	dev := cpu.New()
	got, errs := runWorkers(t, repeat(cfg, 2), data, commtest.OnDevice(dist.NewLocal(2), dev), opts,
		func(r int, dp *train.DataParallel) train.Strategy { return &onDevice{DataParallel: dp, t: t, dev: dev} })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("Comm on a second CPU: rank %d: %v", r, err)
		}
	}
	for r := range 2 {
		closeWeights(t, fmt.Sprintf("rank %d: Comm on a second CPU vs host Comm", r), want[r], got[r], 0, 0)
	}
}

// onDevice checks after Setup that the parameters stayed off the Comm's
// device.
type onDevice struct {
	*train.DataParallel
	t   *testing.T
	dev tensor.Device
}

func (o *onDevice) Setup(s *train.StepContext) error {
	err := o.DataParallel.Setup(s)
	for _, p := range s.Params {
		if p.Param.Value.Device() == o.dev {
			o.t.Errorf("parameter %s moved to the Comm's device", p.Name)
		}
	}
	return err
}

// closeWeights requires |a−b| ≤ atol + rtol·|a| elementwise.
func closeWeights(t *testing.T, what string, a, b map[string][]float32, rtol, atol float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tensors vs %d", what, len(a), len(b))
	}
	worst, where := 0.0, ""
	for k, va := range a {
		vb := b[k]
		if len(vb) != len(va) {
			t.Fatalf("%s: %s has %d elements vs %d", what, k, len(vb), len(va))
		}
		for i := range va {
			d := math.Abs(float64(va[i]) - float64(vb[i]))
			if excess := d - (atol + rtol*math.Abs(float64(va[i]))); excess > worst || math.IsNaN(d) {
				worst, where = excess, k
				if math.IsNaN(d) {
					t.Fatalf("%s: %s[%d] = %v vs %v", what, k, i, vb[i], va[i])
				}
			}
		}
	}
	if worst > 0 {
		t.Errorf("%s: %s differs by %g beyond the tolerance", what, where, worst)
	}
}

// TestDataParallelBuckets checks the bucket layout: parameters last to
// first, each bucket within the cap unless it holds one parameter.
func TestDataParallelBuckets(t *testing.T) {
	tests := []struct {
		cap  int
		want [][]string
	}{
		{0, [][]string{{"5.bias", "5.weight", "3.bias", "3.weight", "1.bias", "1.weight"}}},
		{1, [][]string{{"5.bias"}, {"5.weight"}, {"3.bias"}, {"3.weight"}, {"1.bias"}, {"1.weight"}}},
		// 5.bias 16 B, 5.weight 4 KiB, 3.bias 1 KiB, 3.weight 256 KiB, 1.bias 1 KiB, 1.weight 64 KiB.
		{6 << 10, [][]string{{"5.bias", "5.weight", "3.bias"}, {"3.weight"}, {"1.bias"}, {"1.weight"}}},
		{320 << 10, [][]string{{"5.bias", "5.weight", "3.bias", "3.weight", "1.bias"}, {"1.weight"}}},
	}
	for _, tt := range tests {
		cfg := tinyConfig()
		cfg.Epochs = 1
		comms := dist.NewLocal(1)
		dp := train.NewDataParallel(comms[0], train.DataParallelOptions{BucketBytes: tt.cap})
		tr, err := train.New(cfg, synthetic(32, 4, 1), nil, train.Options{Strategy: dp})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := dp.Buckets()
		if strings.Join(flat(got), " ") != strings.Join(flat(tt.want), " ") || len(got) != len(tt.want) {
			t.Errorf("cap %d: buckets %v, want %v", tt.cap, got, tt.want)
		}
		dp.Close()
		tr.Close()
		comms[0].Close()
	}
}

func flat(bs [][]string) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b...)
		out = append(out, "|")
	}
	return out
}

// TestDataParallelMismatch gives rank 1 another model and requires every
// rank to refuse to start, naming rank 1.
func TestDataParallelMismatch(t *testing.T) {
	cfg := tinyConfig()
	other := cfg
	other.Model = "cnn"
	_, errs := runWorkers(t, []train.Config{cfg, other, cfg}, synthetic(96, 4, 1), dist.NewLocal(3), train.DataParallelOptions{}, nil)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank(s) [1] differ") {
			t.Errorf("rank %d: error %v, want one naming rank 1", r, err)
		}
	}
}

// countingComm counts the all-reduces started on it.
type countingComm struct {
	dist.Comm
	n atomic.Int64
}

func (c *countingComm) AllReduce(ctx context.Context, x *tensor.Tensor, op dist.ReduceOp) error {
	c.n.Add(1)
	return c.Comm.AllReduce(ctx, x, op)
}

// overlapCheck wraps DataParallel and, on entering AfterBackward, requires
// that every bucket's all-reduce has been issued by the gradient hooks.
type overlapCheck struct {
	*train.DataParallel
	c    *countingComm
	step int64
	err  error
}

func (o *overlapCheck) AfterBackward(s *train.StepContext) error {
	o.step++
	want := o.step * int64(len(o.Buckets()))
	deadline := time.Now().Add(5 * time.Second)
	for o.c.n.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := o.c.n.Load(); got < want && o.err == nil {
		o.err = errors.New("buckets not launched before AfterBackward")
	}
	return o.DataParallel.AfterBackward(s)
}

// TestDataParallelOverlap checks that the hooks start the all-reduces
// while backward runs, before AfterBackward.
func TestDataParallelOverlap(t *testing.T) {
	cfg := tinyConfig()
	cfg.Epochs = 1
	local := dist.NewLocal(2)
	cs := []*countingComm{{Comm: local[0]}, {Comm: local[1]}}
	checks := make([]*overlapCheck, 2)
	_, errs := runWorkers(t, repeat(cfg, 2), synthetic(64, 4, 1), []dist.Comm{cs[0], cs[1]}, train.DataParallelOptions{BucketBytes: 2048},
		func(r int, dp *train.DataParallel) train.Strategy {
			checks[r] = &overlapCheck{DataParallel: dp, c: cs[r]}
			return checks[r]
		})
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if checks[r].err != nil {
			t.Errorf("rank %d: %v", r, checks[r].err)
		}
		if n := len(checks[r].Buckets()); n < 3 {
			t.Errorf("rank %d: %d buckets, want several", r, n)
		}
	}
}

// TestDataParallelPeerFails closes rank 1's communicator before it starts;
// rank 0 must return an error instead of waiting for it.
func TestDataParallelPeerFails(t *testing.T) {
	cfg := tinyConfig()
	comms := dist.NewLocal(2)
	comms[1].Close()
	dp := train.NewDataParallel(comms[0], train.DataParallelOptions{})
	defer dp.Close()
	tr, err := train.New(cfg, synthetic(96, 4, 1), nil, train.Options{Strategy: dp, World: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	done := make(chan error, 1)
	go func() {
		_, err := tr.Run(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		var oe *dist.OpError
		if !errors.As(err, &oe) {
			t.Errorf("error %v, want a *dist.OpError", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("rank 0 still waiting 30 s after its peer closed")
	}
	comms[0].Close()
}

// TestDataParallelResumeCounts checks that a data-parallel run resumed
// from a checkpoint counts its bytes, collectives and synchronizations on
// from the checkpoint's, ending with the uninterrupted run's counts.
func TestDataParallelResumeCounts(t *testing.T) {
	cfg := tinyConfig()
	data := synthetic(96, 4, 7)
	dir := t.TempDir()
	const k, stop = 2, 5
	// run trains k ranks, from the checkpoints in dir when resume is set,
	// until stop (0: the end), saving their checkpoints there; it returns
	// each rank's counts.
	run := func(resume bool, stop int) []train.CommStats {
		comms := dist.NewLocal(k)
		stats := make([]train.CommStats, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for r := range k {
			wg.Go(func() {
				defer comms[r].Close()
				dp := train.NewDataParallel(comms[r], train.DataParallelOptions{})
				defer dp.Close()
				tr, err := train.New(cfg, data, nil, train.Options{Strategy: dp, Rank: r, World: k})
				if err != nil {
					errs[r] = err
					return
				}
				defer tr.Close()
				path := filepath.Join(dir, fmt.Sprintf("rank%d.ckpt", r))
				if resume {
					if errs[r] = tr.LoadCheckpoint(path); errs[r] != nil {
						return
					}
				}
				if stop > 0 {
					_, errs[r] = tr.RunUntil(context.Background(), stop)
					if errs[r] == nil {
						errs[r] = tr.SaveCheckpoint(path)
					}
				} else {
					_, errs[r] = tr.Run(context.Background())
				}
				stats[r] = dp.CommStats()
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return stats
	}
	whole := run(false, 0)
	run(false, stop)
	resumed := run(true, 0)
	for r := range k {
		w, g := whole[r], resumed[r]
		if g.Sent != w.Sent || g.Received != w.Received || g.Collectives != w.Collectives || g.Syncs != w.Syncs ||
			g.DataParallelBytes != w.DataParallelBytes {
			t.Errorf("rank %d: resumed run's counts %+v, uninterrupted %+v", r, g, w)
		}
		// Each of the two parts set the model up once.
		if g.SetupBytes != 2*w.SetupBytes {
			t.Errorf("rank %d: resumed run's setup bytes %d, want twice the uninterrupted run's %d", r, g.SetupBytes, w.SetupBytes)
		}
	}
	if whole[0].Syncs == 0 || whole[0].Sent == 0 {
		t.Fatalf("uninterrupted run counted nothing: %+v", whole[0])
	}
}
