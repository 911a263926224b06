package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// What flock bench strategy compares: training steps under
// train.SingleWorker and under Local SGD whose period outlasts the run (no
// synchronization), and Local SGD's synchronization of every parameter
// against a plain all-reduce of as many bytes.
const (
	ImplSingle    = "single"     // train.SingleWorker
	ImplLocal     = "local"      // localopt.Local, constant H longer than the run
	ImplLocalSync = "local-sync" // localopt.Local.AfterStep closing a round (H = 1)
	ImplAllReduce = "allreduce"  // dist.Comm.AllReduce (Avg) of a flat float32 tensor
)

// Targets of flock bench strategy: local steps cost what single-worker
// steps cost, and a synchronization reaches the all-reduce's bandwidth.
const (
	StepsTarget = 0.97 // single/local step time
	SyncTarget  = 0.90 // local-sync/allreduce bus bandwidth
)

// noSync is the Local SGD period of the step measurement: longer than any
// run, so that no round ends.
const noSync = 1 << 30

// StrategyStepsConfig is the in-process measurement of training steps:
// two train.Trainers on the same synthetic data, one with
// train.SingleWorker and one with localopt.Local over a one-rank Comm and
// a period longer than the run, each run taking Steps steps, alternating.
type StrategyStepsConfig struct {
	Model                    string // a name registered in package nn/models
	Batch                    int
	Image, Channels, Classes int // square images of Image×Image×Channels, Classes labels
	// Steps is the number of timed steps of each run.
	Steps int
	// Pairs is the number of measured pairs; each pair runs single and then
	// local, and one warm-up pair comes first.
	Pairs int
	Seed  uint64
}

// StrategyStepsMeasurement is one run of Steps training steps of one
// Trainer.
type StrategyStepsMeasurement struct {
	Record       string  `json:"record"` // "steps"
	Impl         string  `json:"impl"`   // ImplSingle or ImplLocal
	Strategy     string  `json:"strategy"`
	Model        string  `json:"model"`
	Batch        int     `json:"batch"`
	Image        int     `json:"image"`
	Channels     int     `json:"channels"`
	Params       int     `json:"params"`
	Steps        int     `json:"steps"`
	FirstStep    int     `json:"first_step"` // the Trainer's step count before the run
	Seconds      float64 `json:"seconds"`    // wall time of the run's steps
	MsPerStep    float64 `json:"ms_per_step"`
	ImagesPerSec float64 `json:"img_per_s"`
	// TrainLoss is the Trainer's mean training loss over the current epoch
	// after the run: the two Trainers take the same steps, so it is equal.
	TrainLoss float64 `json:"train_loss"`
	// Syncs counts Local's synchronizations so far (always 0; ImplLocal).
	Syncs      int64     `json:"syncs"`
	Threads    int       `json:"threads"`
	Pair       int       `json:"pair"`
	WarmupPair bool      `json:"warmup_pair"`
	Time       time.Time `json:"time"`
}

// syntheticImages returns n random images of side×side×c pixels with
// random labels in classes classes.
func syntheticImages(n, side, c, classes int, seed uint64) *dataset.Images {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	m := &dataset.Images{N: n, H: side, W: side, C: c, Pixels: make([]uint8, n*side*side*c), Labels: make([]int32, n)}
	for i := range m.Pixels {
		m.Pixels[i] = uint8(r.UintN(256))
	}
	for i := range m.Labels {
		m.Labels[i] = int32(r.IntN(classes))
	}
	for k := range classes {
		m.Classes = append(m.Classes, strconv.Itoa(k))
	}
	return m
}

// stepsBatches is the number of batches of the synthetic training set of
// the step measurement: epochs end every stepsBatches steps, as often for
// both Trainers.
const stepsBatches = 16

// RunStrategySteps measures cfg: it builds both Trainers (train.DefaultConfig
// with cfg's model and batch size, no logging, no test set), sets their
// strategies up untimed, and then runs pairs of runs, single first, each
// timing cfg.Steps steps of Trainer.RunUntil after a garbage collection.
// Pair 0 is the warm-up pair. Each measurement is passed to emit (which may
// be nil) as it comes; all are returned.
func RunStrategySteps(ctx context.Context, cfg StrategyStepsConfig, emit func(StrategyStepsMeasurement)) ([]StrategyStepsMeasurement, error) {
	if cfg.Batch < 1 || cfg.Image < 1 || cfg.Channels < 1 || cfg.Classes < 1 || cfg.Steps < 1 || cfg.Pairs < 0 {
		return nil, fmt.Errorf("bench: strategy steps: batch %d, image %d, channels %d, classes %d, steps %d, pairs %d: want pairs ≥ 0, the rest ≥ 1",
			cfg.Batch, cfg.Image, cfg.Channels, cfg.Classes, cfg.Steps, cfg.Pairs)
	}
	images := syntheticImages(stepsBatches*cfg.Batch, cfg.Image, cfg.Channels, cfg.Classes, cfg.Seed)
	tc := train.DefaultConfig()
	tc.Model, tc.BatchSize, tc.Seed = cfg.Model, cfg.Batch, cfg.Seed
	tc.LogEvery, tc.EvalEvery = 0, 0
	// One epoch more than the pairs need: the run never reaches its last
	// step, where Local's only round would end.
	need := (cfg.Pairs + 1) * cfg.Steps
	tc.Epochs = need/stepsBatches + 2

	single, err := train.New(tc, images, nil, train.Options{Strategy: train.SingleWorker{}})
	if err != nil {
		return nil, fmt.Errorf("bench: strategy steps: %w", err)
	}
	defer single.Close()
	comm := dist.NewLocal(1)[0]
	defer comm.Close()
	loc, err := localopt.NewLocal(comm, localopt.Options{Schedule: localopt.Constant{H: noSync}, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("bench: strategy steps: %w", err)
	}
	defer loc.Close()
	local, err := train.New(tc, images, nil, train.Options{Strategy: loc})
	if err != nil {
		return nil, fmt.Errorf("bench: strategy steps: %w", err)
	}
	defer local.Close()
	// RunUntil(0) sets the strategy up and takes no step.
	for _, t := range []*train.Trainer{single, local} {
		if _, err := t.RunUntil(ctx, 0); err != nil {
			return nil, fmt.Errorf("bench: strategy steps: %w", err)
		}
	}
	if start, h := loc.Period(); start+h <= need {
		return nil, fmt.Errorf("bench: strategy steps: Local's first round ends at step %d, within the %d steps measured", start+h, need)
	}
	params := 0
	for _, p := range single.Model().NamedParameters() {
		params += p.Param.Value.NumElements()
	}
	type impl struct {
		name, strategy string
		t              *train.Trainer
	}
	impls := []impl{{ImplSingle, "single worker", single}, {ImplLocal, loc.String(), local}}
	var all []StrategyStepsMeasurement
	for pair := 0; pair <= cfg.Pairs; pair++ {
		for _, im := range impls {
			first := im.t.Step()
			runtime.GC()
			t0 := time.Now()
			sum, err := im.t.RunUntil(ctx, first+cfg.Steps)
			secs := time.Since(t0).Seconds()
			if err != nil {
				return all, fmt.Errorf("bench: strategy steps: %s: %w", im.name, err)
			}
			if n := im.t.Step() - first; n != cfg.Steps {
				return all, fmt.Errorf("bench: strategy steps: %s took %d steps, want %d", im.name, n, cfg.Steps)
			}
			m := StrategyStepsMeasurement{
				Record: "steps", Impl: im.name, Strategy: im.strategy, Model: cfg.Model, Batch: cfg.Batch,
				Image: cfg.Image, Channels: cfg.Channels, Params: params, Steps: cfg.Steps, FirstStep: first,
				Seconds: secs, MsPerStep: 1000 * secs / float64(cfg.Steps), ImagesPerSec: float64(cfg.Batch*cfg.Steps) / secs,
				TrainLoss: sum.TrainLoss, Threads: runtime.GOMAXPROCS(0),
				Pair: pair, WarmupPair: pair == 0, Time: time.Now().UTC().Truncate(time.Second),
			}
			if im.name == ImplLocal {
				m.Syncs = loc.CommStats().Syncs
				if m.Syncs != 0 {
					return all, fmt.Errorf("bench: strategy steps: Local synchronized %d times; its period should outlast the run", m.Syncs)
				}
			}
			all = append(all, m)
			if emit != nil {
				emit(m)
			}
		}
	}
	return all, nil
}

// StrategyStepsSummary gives, for the measured pairs (the warm-up pair
// left out), the milliseconds per step of each Trainer and the ratio
// single/local of step times computed pair by pair: local's throughput as
// a fraction of single's.
type StrategyStepsSummary struct {
	Model  string
	Batch  int
	Steps  int
	Params int
	Single Stats // ms per step
	Local  Stats // ms per step
	Ratio  Stats // single/local
}

// SummarizeStrategySteps summarises ms.
func SummarizeStrategySteps(ms []StrategyStepsMeasurement) StrategyStepsSummary {
	var s StrategyStepsSummary
	single, local := map[int]float64{}, map[int]float64{}
	for _, m := range ms {
		s.Model, s.Batch, s.Steps, s.Params = m.Model, m.Batch, m.Steps, m.Params
		if m.WarmupPair {
			continue
		}
		switch m.Impl {
		case ImplSingle:
			single[m.Pair] = m.MsPerStep
		case ImplLocal:
			local[m.Pair] = m.MsPerStep
		}
	}
	s.Single, s.Local, s.Ratio = pairStats(single, local)
	return s
}

// pairStats returns the statistics of a's and b's figures and of the
// ratios a/b of the pairs that have both.
func pairStats(a, b map[int]float64) (sa, sb, ratio Stats) {
	var xs, ys, rs []float64
	for _, p := range sortedKeys(a) {
		xs = append(xs, a[p])
		if v, ok := b[p]; ok && v > 0 {
			rs = append(rs, a[p]/v)
		}
	}
	for _, p := range sortedKeys(b) {
		ys = append(ys, b[p])
	}
	return StatsOf(xs), StatsOf(ys), StatsOf(rs)
}

// span writes s as "median (min–max)", or "–" for no figures.
func span(s Stats, prec int) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
}

// verdict says whether the median ratio meets target.
func verdict(r Stats, target float64) string {
	switch {
	case r.N == 0:
		return "–"
	case r.Median >= target:
		return "met"
	}
	return "missed"
}

// WriteStrategyStepsTable writes s as a Markdown table.
func WriteStrategyStepsTable(w io.Writer, s StrategyStepsSummary) error {
	_, err := fmt.Fprintf(w, "| model | params | batch | steps/run | single ms/step | local ms/step | single/local | target | pairs |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---|---:|\n"+
		"| %s | %d | %d | %d | %s | %s | %s | ≥ %.2f %s | %d |\n",
		s.Model, s.Params, s.Batch, s.Steps, span(s.Single, 2), span(s.Local, 2), span(s.Ratio, 3),
		StepsTarget, verdict(s.Ratio, StepsTarget), s.Ratio.N)
	return err
}

// StrategySyncWorkerConfig is what each rank of the synchronization
// measurement does.
type StrategySyncWorkerConfig struct {
	Model                    string // a name registered in package nn/models
	Image, Channels, Classes int    // the model's input and output
	// Warmup is the number of untimed synchronizations, and then of
	// untimed all-reduces, before the first pair.
	Warmup int
	// Iters is the number of timed operations of each kind in each pair;
	// a pair's figure is their median.
	Iters int
	// Pairs is the number of measured pairs; each runs Iters
	// synchronizations and then Iters all-reduces, and one warm-up pair
	// comes first.
	Pairs int
	Seed  uint64
}

func (c StrategySyncWorkerConfig) validate() error {
	if c.Image < 1 || c.Channels < 1 || c.Classes < 1 || c.Warmup < 0 || c.Iters < 1 || c.Pairs < 0 {
		return fmt.Errorf("bench: strategy sync: image %d, channels %d, classes %d, warmup %d, iters %d, pairs %d: want warmup, pairs ≥ 0 and the rest ≥ 1",
			c.Image, c.Channels, c.Classes, c.Warmup, c.Iters, c.Pairs)
	}
	return nil
}

// StrategySyncWorker is one rank of the synchronization measurement. It
// builds cfg.Model's parameters (and an SGD optimizer over them) and a
// localopt.Local with constant H = 1 over c, sets it up (rank 0's
// parameters are broadcast), and a float32 tensor with as many elements
// as the parameters that Local averages. Then, after cfg.Warmup untimed
// operations of each kind, for each pair (pair 0 a warm-up) it times
// cfg.Iters calls of Local.AfterStep, each closing a round — the sampling
// of the consensus distance and the in-place all-reduce (Avg) of the flat
// buffer that holds the parameters — and then
// cfg.Iters plain c.AllReduce(Avg) of the tensor, each after a Barrier.
// Rank 0 writes an AllReduceSample per pair and kind (Impl ImplLocalSync,
// then ImplAllReduce) to out as a JSON line.
func StrategySyncWorker(ctx context.Context, c dist.Comm, cfg StrategySyncWorkerConfig, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("bench: strategy sync worker: rank %d: %w", c.Rank(), err) }
	model, err := models.Build(cfg.Model, models.Config{InChannels: cfg.Channels, Height: cfg.Image, Width: cfg.Image, NumClasses: cfg.Classes},
		tensor.NewGenerator(cfg.Seed+uint64(c.Rank())))
	if err != nil {
		return fail(err)
	}
	defer model.Release()
	params := model.NamedParameters()
	vars := make([]*autograd.Var, len(params))
	names := make([]string, len(params))
	elems := 0
	for i, p := range params {
		vars[i], names[i] = p.Param, p.Name
		if p.Param.RequiresGrad() {
			elems += p.Param.Value.NumElements()
		}
	}
	opt := optim.NewSGD([]*optim.Group{optim.NewGroup(vars, names, LearningRate, 0)}, optim.SGDOptions{Momentum: Momentum})
	defer opt.Release()
	const total = noSync
	sc := &train.StepContext{
		Params: params, Model: model, Optimizer: opt,
		Schedule:  optim.Schedule{Base: LearningRate, Decay: optim.Constant, TotalSteps: total},
		Generator: tensor.NewGenerator(cfg.Seed), StepsPerEpoch: total, TotalSteps: total, LR: LearningRate,
	}
	loc, err := localopt.NewLocal(c, localopt.Options{Schedule: localopt.Constant{H: 1}, Context: ctx})
	if err != nil {
		return fail(err)
	}
	defer loc.Close()
	if err := loc.Setup(sc); err != nil {
		return fail(err)
	}
	flat := tensor.Empty(tensor.Shape{elems})
	defer flat.Release()
	flat.Fill(float64(c.Rank() + 1))
	sync := func() error {
		err := loc.AfterStep(sc)
		sc.Step++
		return err
	}
	allReduce := func() error { return c.AllReduce(ctx, flat, dist.Avg) }
	for _, op := range []func() error{sync, allReduce} {
		for range cfg.Warmup {
			if err := op(); err != nil {
				return fail(err)
			}
		}
	}
	n := c.Size()
	version := runtime.Version()
	transport := ""
	if tc, ok := c.(interface{ Transport() string }); ok {
		transport = tc.Transport()
	}
	enc := json.NewEncoder(out)
	kinds := []struct {
		impl string
		op   func() error
	}{{ImplLocalSync, sync}, {ImplAllReduce, allReduce}}
	for range cfg.Pairs + 1 {
		for _, k := range kinds {
			runtime.GC()
			secs := make([]float64, 0, cfg.Iters)
			for range cfg.Iters {
				if err := c.Barrier(ctx); err != nil {
					return fail(err)
				}
				t0 := time.Now()
				err := k.op()
				secs = append(secs, time.Since(t0).Seconds())
				if err != nil {
					return fail(fmt.Errorf("%s: %w", k.impl, err))
				}
			}
			if c.Rank() == 0 {
				s := AllReduceSample{Impl: k.impl, Version: version, Transport: transport, NProc: n, Bytes: int64(4 * elems), Seconds: secs}
				if err := enc.Encode(s); err != nil {
					return fail(err)
				}
			}
		}
	}
	// Every rank put rank+1 in, and averages keep the mean.
	want := float32(n+1) / 2
	for i, v := range flat.Float32s() {
		if math.Abs(float64(v-want)) > 1e-6*float64(want) {
			return fail(fmt.Errorf("all-reduce: element %d is %v, want %v", i, v, want))
		}
	}
	if st := loc.CommStats(); st.Syncs != int64(sc.Step) {
		return fail(fmt.Errorf("local SGD made %d synchronizations in %d steps, want one a step", st.Syncs, sc.Step))
	}
	_ = c.Barrier(ctx)
	return nil
}

// Flags returns cfg as the flags of a worker command line.
func (c StrategySyncWorkerConfig) Flags() []string {
	return []string{"--model", c.Model, "--image", strconv.Itoa(c.Image), "--channels", strconv.Itoa(c.Channels),
		"--classes", strconv.Itoa(c.Classes), "--warmup", strconv.Itoa(c.Warmup), "--iters", strconv.Itoa(c.Iters),
		"--pairs", strconv.Itoa(c.Pairs), "--seed", strconv.FormatUint(c.Seed, 10)}
}

// StrategySyncConfig is the synchronization measurement over NProc
// processes of this machine.
type StrategySyncConfig struct {
	StrategySyncWorkerConfig
	NProc int
	// Flock is the command line of a worker (StrategySyncWorker after
	// dist.Init from the environment); the harness appends the worker
	// config's Flags.
	Flock []string
	// Env is added to the workers' environment (FLOCK_SHM=0 keeps them
	// on TCP).
	Env []string
	// Timeout bounds the run; 0 means 10 minutes.
	Timeout time.Duration
	// Stderr receives the ranks' standard error, each line prefixed with
	// the rank; nil discards it.
	Stderr io.Writer
}

// StrategySyncMeasurement is one pair's figure for one kind of
// operation: the median T of its timed operations on S bytes of
// parameters over n ranks, as bus bandwidth 2(n−1)/n·S/T.
type StrategySyncMeasurement struct {
	Record string `json:"record"` // "sync"
	Model  string `json:"model"`
	Params int64  `json:"params"` // the parameters averaged, S/4
	AllReduceMeasurement
}

// RunStrategySync starts cfg.NProc workers on this machine as
// RunAllReduce does (torchrun's variables on loopback) and yields one
// measurement per pair and kind, passed to emit (which may be nil) as
// they come, and returns them all, warm-up pair included.
func RunStrategySync(ctx context.Context, cfg StrategySyncConfig, emit func(StrategySyncMeasurement)) ([]StrategySyncMeasurement, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.NProc < 1 {
		return nil, fmt.Errorf("bench: strategy sync: %d processes, want ≥ 1", cfg.NProc)
	}
	if len(cfg.Flock) == 0 {
		return nil, errors.New("bench: strategy sync: no worker command")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	argv := append(append([]string(nil), cfg.Flock...), cfg.Flags()...)
	samples, err := launchRanks(ctx, timeout, ImplFlock, argv, cfg.Env, cfg.NProc, cfg.Stderr)
	if err != nil {
		return nil, err
	}
	if want := 2 * (cfg.Pairs + 1); len(samples) != want {
		return nil, fmt.Errorf("bench: strategy sync: the workers reported %d samples, want %d", len(samples), want)
	}
	var all []StrategySyncMeasurement
	for i, s := range samples {
		pair := i / 2
		if want := []string{ImplLocalSync, ImplAllReduce}[i%2]; s.Impl != want || s.NProc != cfg.NProc {
			return all, fmt.Errorf("bench: strategy sync: sample %d is %s over %d ranks, want %s over %d", i, s.Impl, s.NProc, want, cfg.NProc)
		}
		m, err := newMeasurement(s, cfg.Warmup, pair)
		if err != nil {
			return all, err
		}
		sm := StrategySyncMeasurement{Record: "sync", Model: cfg.Model, Params: s.Bytes / 4, AllReduceMeasurement: m}
		all = append(all, sm)
		if emit != nil {
			emit(sm)
		}
	}
	return all, nil
}

// StrategySyncSummary gives, for the measured pairs (the warm-up pair left
// out), the bus bandwidth of Local's synchronization and of the plain
// all-reduce in GB/s, and their ratio sync/all-reduce computed pair by
// pair.
type StrategySyncSummary struct {
	Model     string
	NProc     int
	Bytes     int64
	Transport string
	Sync      Stats
	AllReduce Stats
	Ratio     Stats
}

// SummarizeStrategySync summarises ms.
func SummarizeStrategySync(ms []StrategySyncMeasurement) StrategySyncSummary {
	var s StrategySyncSummary
	sync, ar := map[int]float64{}, map[int]float64{}
	for _, m := range ms {
		s.Model, s.NProc, s.Bytes, s.Transport = m.Model, m.NProc, m.Bytes, m.Transport
		if m.WarmupPair {
			continue
		}
		switch m.Impl {
		case ImplLocalSync:
			sync[m.Pair] = m.BusBW
		case ImplAllReduce:
			ar[m.Pair] = m.BusBW
		}
	}
	s.Sync, s.AllReduce, s.Ratio = pairStats(sync, ar)
	return s
}

// WriteStrategySyncTable writes s as a Markdown table.
func WriteStrategySyncTable(w io.Writer, s StrategySyncSummary) error {
	transport := s.Transport
	if transport == "" {
		transport = "–"
	}
	_, err := fmt.Fprintf(w, "| model | ranks | transport | bytes | Local sync bus GB/s | all-reduce bus GB/s | sync/all-reduce | target | pairs |\n"+
		"|---|---:|---|---:|---:|---:|---:|---|---:|\n"+
		"| %s | %d | %s | %s | %s | %s | %s | ≥ %.2f %s | %d |\n",
		s.Model, s.NProc, transport, formatBytes(s.Bytes), span(s.Sync, 3), span(s.AllReduce, 3), span(s.Ratio, 3),
		SyncTarget, verdict(s.Ratio, SyncTarget), s.Ratio.N)
	return err
}

// formatBytes writes b in decimal megabytes when large, else in bytes.
func formatBytes(b int64) string {
	if b >= 1e6 {
		return fmt.Sprintf("%.2f MB", float64(b)/1e6)
	}
	return fmt.Sprintf("%d B", b)
}

// RunStrategySyncWorker is a rank of a job that RunStrategySync starts: it
// joins the job that the environment describes (dist.EnvFromOS) and runs
// StrategySyncWorker.
func RunStrategySyncWorker(ctx context.Context, cfg StrategySyncWorkerConfig, out io.Writer) error {
	return joinJob(ctx, func(c dist.Comm) error { return StrategySyncWorker(ctx, c, cfg, out) })
}

// Record returns s as a JSON record of kind "summary" and measure "steps";
// a figure without values is null.
func (s StrategyStepsSummary) Record() map[string]any {
	return map[string]any{
		"record": "summary", "measure": "steps", "model": s.Model, "params": s.Params, "batch": s.Batch, "steps": s.Steps,
		"single_ms_per_step": statsRecord(s.Single), "local_ms_per_step": statsRecord(s.Local),
		"ratio_single_local": statsRecord(s.Ratio), "target": StepsTarget,
	}
}

// Record returns s as a JSON record of kind "summary" and measure "sync";
// a figure without values is null.
func (s StrategySyncSummary) Record() map[string]any {
	return map[string]any{
		"record": "summary", "measure": "sync", "model": s.Model, "nproc": s.NProc, "bytes": s.Bytes, "transport": s.Transport,
		"sync_busbw_gbps": statsRecord(s.Sync), "allreduce_busbw_gbps": statsRecord(s.AllReduce),
		"ratio_sync_allreduce": statsRecord(s.Ratio), "target": SyncTarget,
	}
}

// StrategyConfig gathers the measurements of the cost of Local SGD: the
// steps, the synchronization, or both (nil leaves one out), and the
// synchronization's peer.
type StrategyConfig struct {
	Steps *StrategyStepsConfig
	Sync  *StrategySyncConfig
	// Peer is "" or ImplTorchFT, which needs Sync; PeerCommand is its
	// command line (TorchFTCommand).
	Peer        string
	PeerCommand []string
}

// MachineSettings returns c's part of the machine record (MachineRecord):
// the settings of each measurement, and the peer with its command.
func (c StrategyConfig) MachineSettings() map[string]any {
	s := map[string]any{}
	if c := c.Steps; c != nil {
		s["steps"] = map[string]any{"model": c.Model, "batch": c.Batch, "image": c.Image, "channels": c.Channels,
			"classes": c.Classes, "steps": c.Steps, "pairs": c.Pairs}
	}
	if c := c.Sync; c != nil {
		s["sync"] = map[string]any{"model": c.Model, "image": c.Image, "channels": c.Channels, "classes": c.Classes,
			"nproc": c.NProc, "warmup": c.Warmup, "iters": c.Iters, "pairs": c.Pairs, "op": "avg"}
	}
	if c.Peer != "" {
		s["peer"], s["peer_command"] = c.Peer, strings.Join(c.PeerCommand, " ")
	}
	return s
}

// RunStrategy runs cfg's measurements: the steps (RunStrategySteps), then
// the synchronization (RunStrategySync, or RunStrategySyncTorchFT with
// the peer). Each measurement — a StrategyStepsMeasurement, a
// StrategySyncMeasurement or a TorchFTMeasurement — is passed to emit
// (which may be nil) as it comes. The results hold those made until an
// error, if any.
func RunStrategy(ctx context.Context, cfg StrategyConfig, emit func(any)) (StrategyResults, error) {
	r := StrategyResults{Config: cfg}
	if cfg.Peer != "" && (cfg.Peer != ImplTorchFT || cfg.Sync == nil || len(cfg.PeerCommand) == 0) {
		return r, fmt.Errorf("bench: strategy: peer %q with command %q: want torchft, its command and the sync measurement", cfg.Peer, cfg.PeerCommand)
	}
	var err error
	if c := cfg.Steps; c != nil {
		r.Steps, err = RunStrategySteps(ctx, *c, emitAs[StrategyStepsMeasurement](emit))
		if err != nil {
			return r, err
		}
	}
	if c := cfg.Sync; c != nil {
		if cfg.Peer == "" {
			r.Sync, err = RunStrategySync(ctx, *c, emitAs[StrategySyncMeasurement](emit))
		} else {
			r.Sync, r.TorchFT, err = RunStrategySyncTorchFT(ctx, *c, cfg.PeerCommand, emitAs[StrategySyncMeasurement](emit), emitAs[TorchFTMeasurement](emit))
		}
	}
	return r, err
}

// emitAs returns emit for measurements of type T, nil for nil.
func emitAs[T any](emit func(any)) func(T) {
	if emit == nil {
		return nil
	}
	return func(m T) { emit(m) }
}

// StrategyResults are the measurements of a run of RunStrategy; Write
// saves them with the summaries.
type StrategyResults struct {
	Machine map[string]any // MachineRecord, with Config's settings
	Start   time.Time
	Config  StrategyConfig
	Steps   []StrategyStepsMeasurement
	Sync    []StrategySyncMeasurement
	TorchFT []TorchFTMeasurement
}

// SummaryRecords returns the JSON records of the summaries of the
// measurements that Config asks for: the steps', the synchronization's,
// torchft's.
func (r StrategyResults) SummaryRecords() []any {
	var sums []any
	if r.Config.Steps != nil {
		sums = append(sums, SummarizeStrategySteps(r.Steps).Record())
	}
	if r.Config.Sync != nil {
		sums = append(sums, SummarizeStrategySync(r.Sync).Record())
		if r.Config.Peer != "" {
			sums = append(sums, SummarizeTorchFT(r.Sync, r.TorchFT).Record())
		}
	}
	return sums
}

// WriteTables writes the summaries' Markdown tables, in the order of
// SummaryRecords, a blank line between them.
func (r StrategyResults) WriteTables(w io.Writer) error {
	var tables []func() error
	if r.Config.Steps != nil {
		tables = append(tables, func() error { return WriteStrategyStepsTable(w, SummarizeStrategySteps(r.Steps)) })
	}
	if r.Config.Sync != nil {
		tables = append(tables, func() error { return WriteStrategySyncTable(w, SummarizeStrategySync(r.Sync)) })
		if r.Config.Peer != "" {
			tables = append(tables, func() error { return WriteTorchFTTable(w, SummarizeTorchFT(r.Sync, r.TorchFT)) })
		}
	}
	for i, t := range tables {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := t(); err != nil {
			return err
		}
	}
	return nil
}

// Write writes the records (the machine record, the measurements, the
// summaries) to dir/strategy_<date>.jsonl and a report of the method, the
// tables, and the setup to dir/strategy_<date>.md.
func (r StrategyResults) Write(dir string) error {
	cfg := r.Config
	recs := append(appendRecords(appendRecords(appendRecords([]any{r.Machine}, r.Steps), r.Sync), r.TorchFT), r.SummaryRecords()...)
	return writeResults(dir, "strategy", r.Start, recs, func(b *strings.Builder, jsonl string) error {
		reportHeader(b, "Cost of Local SGD", r.Start, r.Machine["command"])
		if c := cfg.Steps; c != nil {
			fmt.Fprintf(b, "Steps: two train.Trainers in one process on the same synthetic images take the same steps, one with train.SingleWorker and one with localopt.Local over a one-rank Comm with a period longer than the run (no synchronization); each run times %d steps of Trainer.RunUntil; pairs alternate single and local, %d pairs after one warm-up pair; the ratio single/local of ms/step is computed pair by pair (target ≥ %.2f).\n\n",
				c.Steps, c.Pairs, StepsTarget)
		}
		if c := cfg.Sync; c != nil {
			fmt.Fprintf(b, "Sync: %d processes on this machine (the table names the transport); each pair times %d Local.AfterStep calls that close a round (constant H = 1: sampling of the consensus distance, in-place all-reduce avg of the flat buffer holding every parameter and two more elements) and then %d plain all-reduces (avg) of a flat float32 tensor of the same S bytes, each after a barrier; a pair's figure is the median T on rank 0, as bus bandwidth 2(n−1)/n · S/T in GB/s (10⁹ B/s); %d untimed operations of each kind first, %d pairs after one warm-up pair; the ratio sync/all-reduce is computed pair by pair (target ≥ %.2f).\n\n",
				c.NProc, c.Iters, c.Iters, c.Warmup, c.Pairs, SyncTarget)
			if cfg.Peer != "" {
				fmt.Fprintf(b, "torchft: the sync measurement runs in %d rounds after a warm-up round, each a flock job over TCP (FLOCK_SHM=0) of a warm-up pair and one measured pair, then bench/peers/torchft_sync.py likewise: torchft's lighthouse and %d replicas, each a Manager (synchronous quorum) over torchft's ProcessGroupGloo on loopback with the same model's parameters in PyTorch, timing %d optimizer steps that are one LocalSGD or DiLoCo synchronization each (sync_every 1, no gradients: the quorum, the all-reduce of every parameter, DiLoCo's outer Nesterov step); figures are ms per synchronization on rank 0, median (min–max) over the rounds, and the ratio is torchft's time over flock's Local synchronization, round by round (above 1: flock faster).\n\n",
					c.Pairs, c.NProc, c.Iters)
			}
		}
		if err := r.WriteTables(b); err != nil {
			return err
		}
		reportMachine(b, r.Machine)
		if len(r.TorchFT) > 0 {
			fmt.Fprintf(b, "- torchft: %s (`%s`).\n", r.TorchFT[0].Version, strings.Join(cfg.PeerCommand, " "))
		}
		fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
		return nil
	})
}
