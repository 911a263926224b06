package localopt_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// bands returns n noisy h×w images with c channels in 4 classes; class k
// is bright in a horizontal band of rows that depends on k.
func bands(n, c, h, w int, seed uint64) *dataset.Images {
	r := rand.New(rand.NewPCG(seed, 1))
	m := &dataset.Images{N: n, H: h, W: w, C: c, Pixels: make([]uint8, n*h*w*c), Labels: make([]int32, n), Classes: []string{"a", "b", "c", "d"}}
	for i := range n {
		k := r.IntN(4)
		m.Labels[i] = int32(k)
		for p, px := range m.Image(i) {
			_ = px
			v := r.IntN(100)
			if row := p / (w * c); row*4/h == k {
				v += 120
			}
			m.Image(i)[p] = uint8(v)
		}
	}
	return m
}

// smallConfig trains the MLP for 3 epochs of 6 steps per worker (K = 2,
// batch 8, 96 images) with momentum SGD.
func smallConfig() train.Config {
	cfg := train.DefaultConfig()
	cfg.Model = "mlp"
	cfg.Epochs = 3
	cfg.BatchSize = 8
	cfg.LR = 0.05
	cfg.WarmupEpochs = 0.5
	cfg.LogEvery = 1
	cfg.EvalBatchSize = 32
	cfg.EvalEvery = 1
	return cfg
}

// snapshot is a worker's state after a step: its parameters, and whether
// the step ended a round.
type snapshot struct {
	step   int
	synced bool
	params map[string][]float32
	// before holds the parameters before a synchronization, at steps that
	// end a round.
	before map[string][]float32
	// momentum holds SGD's momentum buffers after the step.
	momentum map[string][]float32
}

// watch wraps a strategy and records the parameters after every step.
type watch struct {
	train.Strategy
	snaps []snapshot
}

func (w *watch) AfterStep(s *train.StepContext) error {
	var before map[string][]float32
	if p, ok := w.Strategy.(interface{ Period() (int, int) }); ok {
		if start, h := p.Period(); s.Step+1 == start+h {
			before = nntest.Values(s.Params)
		}
	}
	if err := w.Strategy.AfterStep(s); err != nil {
		return err
	}
	synced := true
	if p, ok := w.Strategy.(interface{ Period() (int, int) }); ok {
		start, _ := p.Period()
		synced = start == s.Step+1
	}
	w.snaps = append(w.snaps, snapshot{s.Step, synced, nntest.Values(s.Params), before, momentum(s.Optimizer)})
	return nil
}

func (w *watch) State() (map[string]*tensor.Tensor, map[string]string) {
	return w.Strategy.(train.Stateful).State()
}

func (w *watch) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	return w.Strategy.(train.Stateful).LoadState(ts, sc)
}

func (w *watch) BeforeEval(s *train.StepContext) (func() error, error) {
	if p, ok := w.Strategy.(train.EvalPreparer); ok {
		return p.BeforeEval(s)
	}
	return func() error { return nil }, nil
}

func (w *watch) CommStats() train.CommStats { return w.Strategy.(train.CommReporter).CommStats() }

func (w *watch) Close() {
	if c, ok := w.Strategy.(interface{ Close() }); ok {
		c.Close()
	}
}

// momentum returns the optimizer's momentum buffers by parameter.
func momentum(o optim.Optimizer) map[string][]float32 {
	ts, _ := o.State()
	out := map[string][]float32{}
	for k, t := range ts {
		if strings.HasSuffix(k, ".momentum_buffer") {
			out[k] = slices.Clone(t.Float32s())
		}
		t.Release()
	}
	return out
}

// run is one worker's outcome.
type run struct {
	snaps   []snapshot
	records []train.Record
	final   map[string][]float32
	stats   train.CommStats
	err     error
}

// runK trains cfg on k in-process workers with the strategies made by
// mk; ranks other than 0 start from perturbed weights, which the
// strategy's Setup must replace by rank 0's. With stop > 0 each worker
// stops after stop steps, writes a checkpoint set at ckpt, and new workers
// resume from it.
func runK(t *testing.T, cfg train.Config, data, test *dataset.Images, k int, mk func(c dist.Comm) train.Strategy, stop int, ckpt string) []run {
	t.Helper()
	out := make([]run, k)
	phase := func(comms []dist.Comm, resume bool, until int) {
		var wg sync.WaitGroup
		for r := range k {
			wg.Go(func() {
				o := &out[r]
				w := &watch{Strategy: mk(comms[r])}
				defer w.Close()
				opts := train.Options{Strategy: w, Rank: r, World: k, CheckpointComm: comms[r], CheckpointPath: ckpt,
					OnRecord: func(rec train.Record) { o.records = append(o.records, rec) }}
				ts := test
				if r > 0 {
					opts.PeerEvaluates, ts = test != nil, nil
				}
				tr, err := train.New(cfg, data, ts, opts)
				if err != nil {
					o.err = err
					comms[r].Close()
					return
				}
				defer tr.Close()
				if resume {
					if o.err = tr.LoadCheckpoint(ckpt); o.err != nil {
						comms[r].Close()
						return
					}
				} else if r > 0 {
					g := tensor.NewGenerator(uint64(50 + r))
					for _, p := range tr.Model().NamedParameters() {
						noise := g.Normal(p.Param.Value.Shape(), 0, 0.1)
						p.Param.Value.AddInPlace(noise)
						noise.Release()
					}
				}
				if _, o.err = tr.RunUntil(context.Background(), until); o.err != nil {
					comms[r].Close()
					return
				}
				if until < tr.TotalSteps() {
					o.err = tr.SaveCheckpoint(ckpt)
				}
				o.snaps = append(o.snaps, w.snaps...)
				o.final = nntest.Values(tr.Model().NamedParameters())
				o.stats = w.CommStats()
			})
		}
		wg.Wait()
		for _, c := range comms {
			c.Close()
		}
		for r := range out {
			if out[r].err != nil {
				t.Fatalf("rank %d: %v", r, out[r].err)
			}
		}
	}
	if stop > 0 {
		phase(dist.NewLocal(k), false, stop)
		phase(dist.NewLocal(k), true, math.MaxInt)
	} else if stop < 0 {
		phase(dist.NewLocal(k), true, math.MaxInt)
	} else {
		phase(dist.NewLocal(k), false, math.MaxInt)
	}
	return out
}

func local(sched localopt.SyncSchedule, fields ...string) func(dist.Comm) train.Strategy {
	return func(c dist.Comm) train.Strategy {
		l, err := localopt.NewLocal(c, localopt.Options{Schedule: sched, AverageState: fields, BNBatches: 2})
		if err != nil {
			panic(err)
		}
		return l
	}
}

func diloco(sched localopt.SyncSchedule, outer localopt.OuterOptions) func(dist.Comm) train.Strategy {
	return func(c dist.Comm) train.Strategy {
		d, err := localopt.NewDiLoCo(c, localopt.Options{Schedule: sched, BNBatches: 2}, outer)
		if err != nil {
			panic(err)
		}
		return d
	}
}

// TestH1IsDataParallel checks that K workers with H = 1 and momentum-free
// SGD take the steps of data-parallel SGD, step for step.
func TestH1IsDataParallel(t *testing.T) {
	data := bands(96, 1, 8, 8, 1)
	for _, k := range []int{2, 4} {
		t.Run(fmt.Sprint("K=", k), func(t *testing.T) {
			cfg := smallConfig()
			cfg.Momentum, cfg.Nesterov, cfg.WeightDecay = 0, false, 0
			cfg.BatchSize = 24 / k
			loc := runK(t, cfg, data, nil, k, local(localopt.Constant{H: 1}), 0, "")
			dp := runK(t, cfg, data, nil, k, func(c dist.Comm) train.Strategy {
				return train.NewDataParallel(c, train.DataParallelOptions{})
			}, 0, "")
			if len(loc[0].snaps) != 12 || len(dp[0].snaps) != 12 {
				t.Fatalf("%d and %d steps, want 12", len(loc[0].snaps), len(dp[0].snaps))
			}
			for i, s := range loc[0].snaps {
				if d := nntest.MaxDiff(dp[0].snaps[i].params, s.params); d > 2e-6 {
					t.Errorf("step %d: local H = 1 differs from data parallel by %.3g", i, d)
				}
			}
			// Averaging is linear, so momentum SGD would agree too; AdamW's
			// per-worker moments make Local AdamW with H = 1 another
			// algorithm than parallel AdamW, and the test tells them apart.
			cfg.Optimizer, cfg.LR = "adamw", 1e-3
			loc = runK(t, cfg, data, nil, k, local(localopt.Constant{H: 1}), 0, "")
			dp = runK(t, cfg, data, nil, k, func(c dist.Comm) train.Strategy {
				return train.NewDataParallel(c, train.DataParallelOptions{})
			}, 0, "")
			if d := nntest.MaxDiff(dp[0].final, loc[0].final); d < 1e-4 {
				t.Errorf("Local AdamW with H = 1 matches parallel AdamW (%.3g): per-worker state is not per worker", d)
			}
		})
	}
}

// TestSyncBitIdentical checks that after every synchronization all
// workers hold bit-identical parameters, that they differ between
// synchronizations, and that the rounds follow the plan.
func TestSyncBitIdentical(t *testing.T) {
	data := bands(96, 1, 8, 8, 2)
	cfg := smallConfig()
	sched := localopt.QSR(0.03, 2)
	for name, mk := range map[string]func(dist.Comm) train.Strategy{
		"local":        local(sched),
		"local+state":  local(sched, "momentum_buffer"),
		"diloco":       diloco(sched, localopt.DefaultOuter()),
		"local/K=3/H3": local(localopt.Constant{H: 3}),
	} {
		t.Run(name, func(t *testing.T) {
			k := 2
			if name == "local/K=3/H3" {
				k = 3
			}
			c := cfg
			c.BatchSize = 48 / k / 6
			runs := runK(t, c, data, nil, k, mk, 0, "")
			var syncs, apart int
			for i, s := range runs[0].snaps {
				for r := 1; r < k; r++ {
					same := nntest.Equal(s.params, runs[r].snaps[i].params)
					switch {
					case s.synced && !same:
						t.Errorf("step %d: rank %d differs from rank 0 after a synchronization", s.step, r)
					case !s.synced && !same:
						apart++
					}
				}
				if s.synced {
					syncs++
				}
			}
			if apart == 0 {
				t.Errorf("the workers never differed between synchronizations")
			}
			// Momentum is averaged with the parameters only when asked.
			if name == "local" || name == "local+state" {
				last := len(runs[0].snaps) - 1
				same := nntest.Equal(runs[0].snaps[last].momentum, runs[1].snaps[last].momentum)
				if len(runs[0].snaps[last].momentum) == 0 || same != (name == "local+state") {
					t.Errorf("after the last synchronization the workers' momentum buffers are equal: %v", same)
				}
			}
			if got := runs[0].stats.Syncs; got != int64(syncs) {
				t.Errorf("%d synchronizations counted, %d seen", got, syncs)
			}
			if !runs[0].snaps[len(runs[0].snaps)-1].synced {
				t.Errorf("the run did not end with a synchronization")
			}
		})
	}
}

// TestDiLoCoOuterLR1IsLocal checks DiLoCo's sign: outer SGD with lr 1 and
// no momentum averages the parameters, as Local SGD does.
func TestDiLoCoOuterLR1IsLocal(t *testing.T) {
	data := bands(96, 1, 8, 8, 3)
	cfg := smallConfig()
	sched := localopt.Constant{H: 3}
	loc := runK(t, cfg, data, nil, 2, local(sched), 0, "")
	dl := runK(t, cfg, data, nil, 2, diloco(sched, localopt.OuterOptions{LR: 1}), 0, "")
	for i, s := range loc[0].snaps {
		if d := nntest.MaxDiff(s.params, dl[0].snaps[i].params); d > 1e-6 {
			t.Fatalf("step %d: DiLoCo with outer lr 1 differs from Local SGD by %.3g", i, d)
		}
	}
	// The default outer optimizer moves elsewhere.
	dl = runK(t, cfg, data, nil, 2, diloco(sched, localopt.DefaultOuter()), 0, "")
	if d := nntest.MaxDiff(loc[0].final, dl[0].final); d < 1e-4 {
		t.Errorf("DiLoCo with Nesterov outer momentum ends within %.3g of Local SGD", d)
	}
}

// TestResumeMidRound stops a run in the middle of a round, writes a
// checkpoint set, resumes new workers from it and checks that records and
// final parameters equal the uninterrupted run's bit for bit.
func TestResumeMidRound(t *testing.T) {
	data := bands(96, 1, 8, 8, 4)
	test := bands(40, 1, 8, 8, 5)
	for name, mk := range map[string]func(dist.Comm) train.Strategy{
		"local":  local(localopt.Constant{H: 4}, "momentum_buffer"),
		"diloco": diloco(localopt.QSR(0.04, 3), localopt.DefaultOuter()),
	} {
		t.Run(name, func(t *testing.T) {
			cfg := smallConfig()
			ckpt := filepath.Join(t.TempDir(), "run.ckpt")
			whole := runK(t, cfg, data, test, 2, mk, 0, "")
			parts := runK(t, cfg, data, test, 2, mk, 7, ckpt)
			if whole[0].snaps[6].synced {
				t.Fatalf("step 7 ends a round; the test wants one mid-round")
			}
			for r := range 2 {
				if !nntest.Equal(whole[r].final, parts[r].final) {
					t.Errorf("rank %d: final parameters differ after resuming mid-round", r)
				}
			}
			a, b := whole[0].records, parts[0].records
			if len(a) != len(b) {
				t.Fatalf("%d records, resumed run %d", len(a), len(b))
			}
			for i := range a {
				ra, rb := a[i], b[i]
				if ra.Kind != rb.Kind || ra.Step != rb.Step || ra.Loss != rb.Loss || ra.Acc != rb.Acc || ra.H != rb.H ||
					(ra.Comm == nil) != (rb.Comm == nil) || ra.Comm != nil && (ra.Comm.Sent != rb.Comm.Sent || ra.Comm.Consensus != rb.Comm.Consensus || ra.Comm.Syncs != rb.Comm.Syncs) {
					t.Errorf("record %d: %+v, resumed %+v", i, ra, rb)
				}
			}
		})
	}
}

// TestEvalKeepsTrajectory checks that evaluating mid-round (the average
// taken into the model, batch norm re-estimated, all put back) changes
// nothing of training, and that its bytes are counted apart.
func TestEvalKeepsTrajectory(t *testing.T) {
	data := bands(64, 3, 8, 8, 6)
	test := bands(20, 3, 8, 8, 7)
	cfg := smallConfig()
	cfg.Model = "resnet20"
	cfg.Epochs = 2
	cfg.BatchSize = 8
	mk := local(localopt.Constant{H: 3})
	with := runK(t, cfg, data, test, 2, mk, 0, "")
	without := runK(t, cfg, data, nil, 2, mk, 0, "")
	for r := range 2 {
		if !nntest.Equal(with[r].final, without[r].final) {
			t.Errorf("rank %d: evaluating changed the trajectory", r)
		}
	}
	if with[0].stats.EvalBytes == 0 || without[0].stats.EvalBytes != 0 {
		t.Errorf("evaluation bytes %d with evaluation, %d without", with[0].stats.EvalBytes, without[0].stats.EvalBytes)
	}
	if with[0].stats.Sent != without[0].stats.Sent {
		t.Errorf("training sent %d bytes with evaluation, %d without", with[0].stats.Sent, without[0].stats.Sent)
	}
}

// TestCommAccounting checks the bytes and collectives of Local SGD against
// the ring all-reduce's cost, and the saving against data parallel.
func TestCommAccounting(t *testing.T) {
	data := bands(96, 1, 8, 8, 8)
	cfg := smallConfig()
	k := 4
	cfg.BatchSize = 4
	runs := runK(t, cfg, data, nil, k, local(localopt.Constant{H: 3}), 0, "")
	m, err := newMLP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pbytes := int64(4 * nn.NumParameters(m))
	m.Release()
	st := runs[0].stats
	steps := int64(len(runs[0].snaps))
	syncs := (steps + 2) / 3
	// Each synchronization all-reduces the parameters and two elements,
	// the previous one's consensus distances and the interruptions; the
	// last one's distances travel alone.
	wantSent := syncs*dist.AllReduceBytes(pbytes+8, k) + dist.AllReduceBytes(4, k)
	if st.Syncs != syncs || st.Sent != wantSent || st.Received != wantSent || st.Collectives != syncs+1 {
		t.Errorf("stats %+v; want %d syncs, %d bytes each way in %d collectives", st, syncs, wantSent, syncs+1)
	}
	if st.DataParallelBytes != steps*dist.AllReduceBytes(pbytes, k) {
		t.Errorf("data-parallel bytes %d, want %d", st.DataParallelBytes, steps*dist.AllReduceBytes(pbytes, k))
	}
	if s := st.Saving(); math.Abs(s-3) > 0.01 {
		t.Errorf("saving %.3f×, want ≈ 3× (H = 3)", s)
	}
	if st.Consensus <= 0 || st.Consensus > 1 {
		t.Errorf("consensus distance %v, want in (0, 1]", st.Consensus)
	}
}

func newMLP(cfg train.Config) (nn.Layer, error) {
	tr, err := train.New(cfg, bands(16, 1, 8, 8, 9), nil, train.Options{})
	if err != nil {
		return nil, err
	}
	// The Trainer's model, detached from it: the optimizer holds no state yet.
	return tr.Model(), nil
}

// TestBNReestimation checks, at an evaluation mid-round, that each
// worker's batch-norm statistics are the cumulative average over its first
// micro-batches of the epoch — computed here in closed form from the
// averaged model's first convolution — and that the statistics evaluated
// are the mean of the workers'.
func TestBNReestimation(t *testing.T) {
	data := bands(64, 3, 8, 8, 10)
	test := bands(20, 3, 8, 8, 11)
	cfg := smallConfig()
	cfg.Model = "resnet20"
	cfg.Epochs = 2
	cfg.BatchSize = 8
	const k, nb = 2, 2
	type seen struct{ mean, vr, want, wantVar []float64 }
	got := make([]seen, k)
	var wg sync.WaitGroup
	comms := dist.NewLocal(k)
	for r := range k {
		wg.Go(func() {
			l, err := localopt.NewLocal(comms[r], localopt.Options{Schedule: localopt.Constant{H: 5}, BNBatches: nb})
			if err != nil {
				panic(err)
			}
			defer l.Close()
			p := &probe{Local: l, rank: r, k: k, cfg: cfg, data: data, n: nb}
			ts := test
			if r > 0 {
				ts = nil
			}
			tr, err := train.New(cfg, data, ts, train.Options{Strategy: p, Rank: r, World: k, PeerEvaluates: r > 0})
			if err != nil {
				panic(err)
			}
			defer tr.Close()
			if _, err := tr.Run(context.Background()); err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
			got[r] = seen{p.mean, p.vr, p.want, p.wantVar}
		})
	}
	wg.Wait()
	if got[0].mean == nil {
		t.Fatal("no evaluation was prepared")
	}
	for c := range got[0].mean {
		wm := (got[0].want[c] + got[1].want[c]) / 2
		wv := (got[0].wantVar[c] + got[1].wantVar[c]) / 2
		for r := range k {
			if math.Abs(got[r].mean[c]-wm) > 1e-5*(1+math.Abs(wm)) || math.Abs(got[r].vr[c]-wv) > 1e-4*(1+math.Abs(wv)) {
				t.Fatalf("rank %d channel %d: running mean %v var %v, want the workers' mean %v and %v", r, c, got[r].mean[c], got[r].vr[c], wm, wv)
			}
		}
	}
	if got[0].want[0] == got[1].want[0] {
		t.Errorf("the two workers re-estimated the same statistics; the test cannot tell averaging from none")
	}
}

// probe records, at the evaluation, the first batch norm's running
// statistics and their closed form for this worker.
type probe struct {
	*localopt.Local
	rank, k, n              int
	cfg                     train.Config
	data                    *dataset.Images
	mean, vr, want, wantVar []float64
}

func (p *probe) BeforeEval(s *train.StepContext) (func() error, error) {
	// The closed form needs the averaged weights, which BeforeEval puts in
	// the model; the statistics it computes are then averaged, so compute
	// this worker's own from the same weights after the call.
	restore, err := p.Local.BeforeEval(s)
	if err != nil {
		return nil, err
	}
	var conv *nn.Conv2d
	var bn *nn.BatchNorm2d
	for _, m := range nn.NamedModules(s.Model) {
		switch m := m.Module.(type) {
		case *nn.Conv2d:
			if conv == nil {
				conv = m
			}
		case *nn.BatchNorm2d:
			if bn == nil {
				bn = m
			}
		}
	}
	if p.mean != nil {
		return restore, nil
	}
	p.mean = toF64(bn.RunningMean)
	p.vr = toF64(bn.RunningVar)
	loader, err := dataset.NewLoader(p.data, dataset.LoaderOptions{BatchSize: p.cfg.BatchSize, Shuffle: true, Seed: p.cfg.Seed, Rank: p.rank, World: p.k})
	if err != nil {
		return nil, err
	}
	epoch := s.Step / s.StepsPerEpoch
	if err := loader.Seek(dataset.Position{Epoch: epoch}); err != nil {
		return nil, err
	}
	p.want = make([]float64, bn.Features)
	p.wantVar = make([]float64, bn.Features)
	autograd.NoGrad(func() {
		for range p.n {
			b, _ := loader.Next()
			x := autograd.Const(b.X)
			y := conv.Forward(x)
			x.Release()
			mean := y.Value.Mean(0, 2, 3)
			vr := y.Value.Var(1, 0, 2, 3)
			for c, v := range toF64(mean) {
				p.want[c] += v / float64(p.n)
			}
			for c, v := range toF64(vr) {
				p.wantVar[c] += v / float64(p.n)
			}
			mean.Release()
			vr.Release()
			y.Release()
			b.Y.Release()
		}
	})
	return restore, nil
}

func toF64(t *tensor.Tensor) []float64 {
	c := t.Cast(tensor.Float64)
	defer c.Release()
	return slices.Clone(c.Float64s())
}

// TestConsensusDistance checks the consensus distance of each
// synchronization against mean_k ‖θ_k − θ̄‖ / ‖θ̄‖ computed here from the
// workers' parameters: exactly for a small model, and within the sampling
// error for one of more than 2¹⁸ parameters, measured on sampled runs.
func TestConsensusDistance(t *testing.T) {
	for _, tt := range []struct {
		model string
		c     int
		rtol  float64
	}{{"mlp", 1, 1e-5}, {"resnet20", 3, 0.1}} {
		t.Run(tt.model, func(t *testing.T) {
			cfg := smallConfig()
			cfg.Model = tt.model
			cfg.Epochs = 1
			cfg.BatchSize = 8
			runs := runK(t, cfg, bands(64, tt.c, 8, 8, 12), nil, 2, local(localopt.Constant{H: 2}), 0, "")
			var got []float64
			for _, r := range runs[0].records {
				if r.Kind == train.KindSync {
					got = append(got, r.Comm.Consensus)
				}
			}
			var want []float64
			for i, s := range runs[0].snaps {
				if s.before == nil {
					continue
				}
				mean := 0.0
				for _, rn := range runs {
					var d2, n2 float64
					for name, bar := range s.params {
						for j, v := range bar {
							e := float64(rn.snaps[i].before[name][j]) - float64(v)
							d2 += e * e
							n2 += float64(v) * float64(v)
						}
					}
					mean += math.Sqrt(d2/n2) / float64(len(runs))
				}
				want = append(want, mean)
			}
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%d sync records, %d synchronizations seen", len(got), len(want))
			}
			t.Logf("consensus distances %.4g, computed here %.4g", got, want)
			for i := range got {
				if math.Abs(got[i]-want[i]) > tt.rtol*want[i] || want[i] == 0 {
					t.Errorf("synchronization %d: consensus distance %.6g, want %.6g", i, got[i], want[i])
				}
			}
		})
	}
}

// TestInterruptStopsAtSync interrupts one worker mid-round and checks that
// every worker stops at the next synchronization, at the same step, with
// a checkpoint set from which the run continues exactly.
func TestInterruptStopsAtSync(t *testing.T) {
	data := bands(96, 1, 8, 8, 13)
	cfg := smallConfig()
	const k = 2
	mk := local(localopt.Constant{H: 4})
	ckpt := filepath.Join(t.TempDir(), "run.ckpt")
	whole := runK(t, cfg, data, nil, k, mk, 0, "")

	comms := dist.NewLocal(k)
	steps := make([]int, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r := range k {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := train.Options{Strategy: mk(comms[r]), Rank: r, World: k, CheckpointComm: comms[r], CheckpointPath: ckpt}
			if r == 1 {
				opts.OnProgress = func(p train.Progress) {
					if p.Step == 5 {
						cancel()
					}
				}
			}
			tr, err := train.New(cfg, data, nil, opts)
			if err != nil {
				errs[r] = err
				return
			}
			defer tr.Close()
			_, errs[r] = tr.Run(ctx)
			steps[r] = tr.Step()
		})
	}
	wg.Wait()
	for r, err := range errs {
		if want := []error{train.ErrPeerInterrupted, context.Canceled}[r]; !errors.Is(err, want) {
			t.Fatalf("rank %d: %v, want an error wrapping %q", r, err, want)
		}
	}
	if steps[0] != 8 || steps[1] != 8 {
		t.Fatalf("the workers stopped after steps %v, want both after 8 (the round of steps 5–8 ends there)", steps)
	}
	resumed := runK(t, cfg, data, nil, k, mk, -1, ckpt)
	for r := range k {
		if !nntest.Equal(whole[r].final, resumed[r].final) {
			t.Errorf("rank %d: resuming after the interruption does not reproduce the run", r)
		}
	}
}

// TestTransports checks that Local SGD and DiLoCo compute the same
// parameters over TCP, shared memory and in-process ranks, and over
// in-process ranks that claim a device of their own (as NCCL's claim their
// GPU), where the strategy's buffers live on that device and the
// parameters stay off it.
func TestTransports(t *testing.T) {
	data := bands(96, 1, 8, 8, 14)
	cfg := smallConfig()
	for name, mk := range map[string]func(dist.Comm) train.Strategy{
		"local":  local(localopt.QSR(0.04, 2), "momentum_buffer"),
		"diloco": diloco(localopt.Constant{H: 3}, localopt.DefaultOuter()),
	} {
		t.Run(name, func(t *testing.T) {
			want := runK(t, cfg, data, nil, 2, mk, 0, "")
			for _, shm := range []bool{false, true} {
				got := runWith(t, cfg, data, commtest.Loopback(t, 2, shm), mk)
				for r := range 2 {
					if !nntest.Equal(want[r].final, got[r]) {
						t.Errorf("shared memory %v: rank %d's parameters differ from the in-process run's", shm, r)
					}
				}
			}
			got := runWith(t, cfg, data, commtest.OnDevice(dist.NewLocal(2), cpu.New()), mk)
			for r := range 2 {
				if !nntest.Equal(want[r].final, got[r]) {
					t.Errorf("Comm on a second CPU: rank %d's parameters differ from the in-process run's", r)
				}
			}
		})
	}
}

// runWith trains cfg on the workers of comms and returns their final
// parameters.
func runWith(t *testing.T, cfg train.Config, data *dataset.Images, comms []dist.Comm, mk func(dist.Comm) train.Strategy) []map[string][]float32 {
	t.Helper()
	out := make([]map[string][]float32, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			s := mk(comms[r])
			defer s.(interface{ Close() }).Close()
			tr, err := train.New(cfg, data, nil, train.Options{Strategy: s, Rank: r, World: len(comms)})
			if err != nil {
				errs[r] = err
				return
			}
			defer tr.Close()
			if _, errs[r] = tr.Run(context.Background()); errs[r] == nil {
				out[r] = nntest.Values(tr.Model().NamedParameters())
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out
}
