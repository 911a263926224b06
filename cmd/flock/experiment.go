package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/internal/term"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/netmodel"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

func init() {
	extraCommands = append(extraCommands, command{"experiment", "run a grid of training runs and report accuracy against communication", runExperiment, experimentHelp})
}

// gridStrategy is one strategy of the grid: the flock train flags that
// select it, on top of the experiment's common ones.
type gridStrategy struct {
	name, label string
	args        func(epochs int) []string
}

// fixed returns args whatever the number of epochs.
func fixed(args ...string) func(int) []string { return func(int) []string { return args } }

// The learning rates of the grid: 0.05 for SGD (Nesterov momentum) — at
// 8 workers × 128 images data parallel's batch is 1024, and flock train's
// 0.15 for 4 workers diverges there on some seeds —, AdamW's usual 10⁻³,
// and LARS's, untuned for JointSpar's shared draws and tuned for LARS and
// balanced draws; QSR's α keeps α/η at the peak the same (4/3)
// for SGD and AdamW, so that H starts at Hbase in both.
const (
	sgdLR      = "0.05"
	sgdAlpha   = "0.0667"
	adamwLR    = "1e-3"
	adamwAlpha = "1.33e-3"
	// larsLR is the best of 4, 8, 16, 32, 48 and 64 for balanced draws
	// and of 16, 32, 48 and 64 for data-parallel LARS, both with the
	// trust ratio on every parameter, seed 1.
	larsLR = "32"
)

// strategyGrid is every strategy of flock experiment strategies.
var strategyGrid = []gridStrategy{
	{"dp", "Data parallel", fixed("--strategy", "dp")},
	{"local-h2", "Local SGD, H = 2", fixed("--strategy", "local", "--sync", "constant", "--h", "2")},
	{"local-h8", "Local SGD, H = 8", fixed("--strategy", "local", "--sync", "constant", "--h", "8")},
	{"post-local", "Post-local SGD, H = 8", func(epochs int) []string {
		// The switch at a quarter of the run, where the cosine
		// schedule's rate has fallen by 15%.
		return []string{"--strategy", "local", "--sync", "post-local", "--h", "8", "--post-local-switch", strconv.FormatFloat(float64(epochs)/4, 'g', -1, 64)}
	}},
	{"local-power1", "Local SGD, H ∝ η⁻¹", fixed("--strategy", "local", "--sync", "power", "--power-gamma", "1", "--h-base", "2", "--qsr-alpha", sgdAlpha)},
	{"local-qsr", "Local SGD, QSR (H ∝ η⁻²)", fixed("--strategy", "local", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", sgdAlpha)},
	{"local-power3", "Local SGD, H ∝ η⁻³", fixed("--strategy", "local", "--sync", "power", "--power-gamma", "3", "--h-base", "2", "--qsr-alpha", sgdAlpha)},
	{"adamw-qsr", "Local AdamW, QSR", fixed("--strategy", "local", "--optimizer", "adamw", "--lr", adamwLR, "--weight-decay", "0.05", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", adamwAlpha)},
	{"diloco", "DiLoCo, H = 8", fixed("--strategy", "diloco", "--optimizer", "adamw", "--lr", adamwLR, "--weight-decay", "0.05", "--sync", "constant", "--h", "8")},
	{"diloco-qsr", "DiLoCo, QSR", fixed("--strategy", "diloco", "--optimizer", "adamw", "--lr", adamwLR, "--weight-decay", "0.05", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", adamwAlpha)},
	{"dmsgd-exp", "DmSGD, exponential graph", fixed("--strategy", "dmsgd", "--topology", "exp")},
	{"dmsgd-one-peer", "DmSGD, one-peer exp. graph", fixed("--strategy", "dmsgd", "--topology", "one-peer-exp")},
	{"dmsgd-ring", "DmSGD, ring", fixed("--strategy", "dmsgd", "--topology", "ring")},
	{"swarm", "Swarm SGD, H = 2", fixed("--strategy", "swarm", "--topology", "full", "--local-steps", "2")},
	{"swarm-q8", "Swarm SGD, H = 2, 8-bit", fixed("--strategy", "swarm", "--topology", "full", "--local-steps", "2", "--quant-bits", "8")},
	{"jointspar-lars", "JointSpar-LARS, budget 0.5", fixed("--strategy", "jointspar", "--budget", "0.5", "--optimizer", "lars", "--lr", "1")},
	{"lars", "Data parallel, LARS", fixed("--strategy", "dp", "--optimizer", "lars", "--lars-adapt-all", "--lr", larsLR)},
	{"jointspar-balanced", "JointSpar-LARS, budget 0.5, balanced draws", fixed("--strategy", "jointspar", "--budget", "0.5", "--balanced-draws", "--optimizer", "lars", "--lars-adapt-all", "--lr", larsLR)},
}

// quickStrategies are the strategies of --quick: one of each
// communication pattern, and a schedule whose H changes.
var quickStrategies = []string{"dp", "local-h2", "local-qsr", "dmsgd-exp", "swarm"}

// The defaults of the full grid: about 17 minutes on two idle cores, well
// inside the 90 that a full grid may take (see experimentHelp).
const (
	expDefaultEpochs = 3
	expDefaultSeeds  = "1,2,3"
	expDefaultOut    = "bench/results/strategies"
)

type experimentOptions struct {
	model, seeds, only, out, data, network, allreduce string
	workers, epochs, trainImages, batch, jobs, scale  int
	threads                                           int
	latency, bandwidth, stepTime                      float64
	quick, dryRun, report                             bool
}

func experimentFlags(o *experimentOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock experiment strategies", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.model, "model", "cnn", "`MODEL` every run trains (cnn, resnet20, …)")
	fs.StringVar(&o.seeds, "seeds", expDefaultSeeds, "comma-separated `SEEDS`, one run of each strategy per seed")
	fs.StringVar(&o.only, "strategies", "", "comma-separated `NAMES` of the strategies to run (default: all; --dry-run lists them)")
	fs.IntVar(&o.workers, "workers", 8, "in-process workers of each run, `K`")
	fs.IntVar(&o.epochs, "epochs", expDefaultEpochs, "epochs of each run")
	fs.IntVar(&o.trainImages, "train-images", 0, "train on the first `N` training images (0: all 60000)")
	fs.IntVar(&o.batch, "batch-size", 128, "images per worker and step")
	fs.IntVar(&o.jobs, "jobs", 1, "runs at once, each a set of K goroutines")
	fs.IntVar(&o.threads, "threads", 0, fmt.Sprintf("GOMAXPROCS (0: all %d cores)", runtime.NumCPU()))
	fs.StringVar(&o.out, "out", expDefaultOut, "`DIR` of the runs (runs.jsonl, appended as runs finish and read back to resume) and of the report")
	fs.StringVar(&o.data, "data", "", "`DIR` holding the Fashion-MNIST files (default: as flock train)")
	fs.BoolVar(&o.quick, "quick", false, "a grid of seconds: "+strings.Join(quickStrategies, ", ")+"; 2 workers, 1 epoch on 2048 images, seed 1 (other flags given still apply)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list the runs, marking those already done, and exit")
	fs.BoolVar(&o.report, "report-only", false, "write the report from the runs already in runs.jsonl, training nothing")
	fs.StringVar(&o.network, "network", "10gbe", "network of the projection, one of the networks above; --latency, --bandwidth, --allreduce override its values")
	fs.Float64Var(&o.latency, "latency", -1, "α of the projection's network, in `SECONDS` (e.g. 25e-6; negative: the preset's)")
	fs.Float64Var(&o.bandwidth, "bandwidth", 0, "β of the projection's network, in `BYTES/S` per link and direction (e.g. 1.25e9; 0: the preset's)")
	fs.StringVar(&o.allreduce, "allreduce", "", "all-reduce of the projection: ring or halving-doubling (default: the preset's)")
	fs.IntVar(&o.scale, "scale", 64, "nodes `P` of the projection (one worker each)")
	fs.Float64Var(&o.stepTime, "step-time", 0, "compute time of one step at scale in `SECONDS` (0: measured, see below)")
	return fs
}

func experimentHelp(w io.Writer) {
	var o experimentOptions
	fs := experimentFlags(&o)
	fmt.Fprint(w, `Usage: flock experiment strategies [flags]

Train every strategy of flock train on Fashion-MNIST with the same data,
seeds and code, and report accuracy against communication: bytes each
worker sent, synchronizations, compute time, and the wall-clock time the
run would take on --scale nodes of a network in the α–β model (package
netmodel). Each run is what 'flock train --workers K --json' with the
run's flags does, in this process; --jobs runs go at once.

Runs are appended to DIR/runs.jsonl as they finish; a grid started again
(after a crash or Ctrl-C) skips the runs found there with the same flags.
At the end the report is written into DIR: report.jsonl (every run with its
projection), report.md (a table, mean ± std over the seeds) and the SVG
figures acc_bytes.svg, acc_time.svg, curves.svg and h.svg.

The grid (flags added to each run's):
`)
	for _, s := range strategyGrid {
		fmt.Fprintf(w, "  %-19s %s\n", s.name, strings.Join(s.args(expDefaultEpochs), " "))
	}
	fmt.Fprintf(w, `
Every run: --model MODEL --workers K --epochs E --batch-size B --seed S
--eval-every 1 --lr 0.05 (a strategy's own --lr overrides it), otherwise
flock train's defaults (Nesterov SGD, cosine schedule). The defaults, %d strategies × 3 seeds × %d epochs of the
CNN on 8 workers, take about 17 minutes on two idle cores; ResNet-20's
steps cost many times more.

Projection: a run of S steps with N synchronizations costs
S·t_step + N·T_sync on P nodes, where T_sync is a ring (or halving-doubling)
all-reduce of the bytes each synchronization reduced for dp, local, diloco
and jointspar (for balanced draws, whose holders exchange point to point,
the all-reduce that would send what the run sent); a model sent to each
out-neighbour of the run's graph on P nodes for dmsgd; one pairwise swap
of what an interaction sent for swarm.
t_step is --step-time, or else measured: the run's wall time less its
evaluations and the time it waited on communication, per step, times the share of this machine's
cores each of the K·jobs workers had (min(1, cores/(K·jobs))), that is the
step of one worker with the machine to itself.

Networks (--network):
`, len(strategyGrid), expDefaultEpochs)
	for _, n := range netmodel.Presets {
		fmt.Fprintf(w, "  %-6s α = %g s, β = %g B/s, %s all-reduce\n", n.Name, n.Latency, n.Bandwidth, n.AllReduce)
	}
	fmt.Fprint(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Examples:
  flock experiment strategies --dry-run
  flock experiment strategies                       # the full grid into bench/results/strategies
  flock experiment strategies --model resnet20 --out bench/results/strategies-resnet20
  flock experiment strategies --quick --out /tmp/quick
  flock experiment strategies --report-only --network wan
`)
}

// expUsage reports a bad command line in one line and returns exitUsage.
func expUsage(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "flock experiment: "+format+"; run 'flock experiment strategies --help' for usage\n", a...)
	return exitUsage
}

func runExperiment(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		experimentHelp(stdout)
		return exitOK
	}
	if len(args) == 0 || args[0] != "strategies" {
		return expUsage(stderr, "want the experiment 'strategies'")
	}
	args = args[1:]
	var o experimentOptions
	fs := experimentFlags(&o)
	usage := func(format string, a ...any) int { return expUsage(stderr, format, a...) }
	if code, done := parseFlags(fs, args, experimentHelp, usage, stdout); done {
		return code
	}
	if o.quick {
		given := func(name string) bool { return flagGiven(fs, name) }
		if !given("workers") {
			o.workers = 2
		}
		if !given("epochs") {
			o.epochs = 1
		}
		if !given("train-images") {
			o.trainImages = 2048
		}
		if !given("seeds") {
			o.seeds = "1"
		}
		if !given("strategies") {
			o.only = strings.Join(quickStrategies, ",")
		}
	}
	runs, err := experimentRuns(o)
	if err != nil {
		return expUsage(stderr, "%v", err)
	}
	net, err := experimentNetwork(o)
	if err != nil {
		return expUsage(stderr, "%v", err)
	}
	if o.jobs < 1 || o.threads < 0 || o.scale < 1 || o.stepTime < 0 {
		return expUsage(stderr, "jobs %d, threads %d, scale %d, step-time %v: want jobs, scale ≥ 1 and threads, step-time ≥ 0", o.jobs, o.threads, o.scale, o.stepTime)
	}
	path := filepath.Join(o.out, "runs.jsonl")
	done, err := readRuns(path)
	if err != nil {
		fmt.Fprintf(stderr, "flock experiment: %v\n", err)
		return exitFailure
	}
	if o.dryRun {
		for _, r := range runs {
			mark := "  "
			if _, ok := done[r.ID]; ok {
				mark = "✓ "
			}
			fmt.Fprintf(stdout, "%s%-26s flock train %s\n", mark, r.ID, strings.Join(r.Args, " "))
		}
		fmt.Fprintf(stdout, "%d runs, %d done in %s\n", len(runs), countDone(runs, done), path)
		return exitOK
	}
	for _, r := range runs {
		if d, ok := done[r.ID]; ok && !slices.Equal(d.Args, r.Args) {
			fmt.Fprintf(stderr, "flock experiment: %s holds run %s with other flags (%s); use another --out\n", path, r.ID, strings.Join(d.Args, " "))
			return exitFailure
		}
	}
	if o.threads > 0 {
		runtime.GOMAXPROCS(o.threads)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if !o.report {
		trainSet, testSet, _, err := fashionMNIST(ctx, "flock experiment", o.data, true, stderr, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "flock experiment: %v\n", err)
			return exitFailure
		}
		g := &grid{runs: runs, done: done, path: path, jobs: o.jobs, trainSet: trainSet, testSet: testSet,
			progress: newGridProgress(stdout, term.IsTerminal(stdout))}
		if err := g.run(ctx); err != nil {
			fmt.Fprintf(stderr, "flock experiment: %v\n", err)
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "flock experiment: interrupted; the runs finished are in %s, and the same command continues\n", path)
				return exitInterrupted
			}
			return exitFailure
		}
	}
	var recs []runRecord
	for _, r := range runs {
		if d, ok := done[r.ID]; ok {
			recs = append(recs, d)
		}
	}
	if len(recs) == 0 {
		fmt.Fprintf(stderr, "flock experiment: no runs of this grid in %s\n", path)
		return exitFailure
	}
	command := strings.Join(append([]string{"flock", "experiment", "strategies"}, args...), " ")
	rep := projectRuns(recs, net, o.scale, o.stepTime)
	if err := writeExperimentReport(o.out, command, net, o.scale, rep); err != nil {
		fmt.Fprintf(stderr, "flock experiment: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(o.out, "report.md"))
	return exitOK
}

// experimentNetwork is the projection's network: the preset, with the
// values given as flags.
func experimentNetwork(o experimentOptions) (netmodel.Network, error) {
	n, err := netmodel.Preset(o.network)
	if err != nil {
		return n, err
	}
	if o.latency >= 0 {
		n.Latency = o.latency
		n.Name += " (custom)"
	}
	if o.bandwidth != 0 {
		n.Bandwidth = o.bandwidth
		if !strings.HasSuffix(n.Name, "(custom)") {
			n.Name += " (custom)"
		}
	}
	if o.allreduce != "" {
		n.AllReduce = o.allreduce
	}
	return n, n.Validate()
}

// gridRun is one run of the grid.
type gridRun struct {
	// ID is unique in the grid: the strategy and the seed.
	ID, Strategy, Label string
	Seed                uint64
	// Args are the run's flock train flags.
	Args []string
}

// experimentRuns lists the runs o asks for, strategy by strategy.
func experimentRuns(o experimentOptions) ([]gridRun, error) {
	if !slices.Contains(models.Names(), o.model) {
		return nil, fmt.Errorf("unknown model %q (models: %s)", o.model, strings.Join(models.Names(), ", "))
	}
	if o.workers < 2 || o.epochs < 1 || o.trainImages < 0 || o.batch < 1 {
		return nil, fmt.Errorf("workers %d, epochs %d, train-images %d, batch-size %d: want workers ≥ 2, epochs and batch-size ≥ 1, train-images ≥ 0", o.workers, o.epochs, o.trainImages, o.batch)
	}
	seeds, err := parseList(o.seeds, "seeds", func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
	if err != nil {
		return nil, err
	}
	strategies := strategyGrid
	if o.only != "" {
		names, err := parseList(o.only, "strategies", func(s string) (string, error) {
			if !slices.ContainsFunc(strategyGrid, func(g gridStrategy) bool { return g.name == s }) {
				return "", errors.New("not in the grid")
			}
			return s, nil
		})
		if err != nil {
			return nil, err
		}
		strategies = slices.DeleteFunc(slices.Clone(strategyGrid), func(g gridStrategy) bool { return !slices.Contains(names, g.name) })
	}
	var runs []gridRun
	for _, s := range strategies {
		for _, seed := range seeds {
			args := []string{"--model", o.model, "--workers", strconv.Itoa(o.workers), "--epochs", strconv.Itoa(o.epochs),
				"--batch-size", strconv.Itoa(o.batch), "--seed", strconv.FormatUint(seed, 10), "--eval-every", "1", "--log-every", "0", "--lr", sgdLR}
			if o.trainImages > 0 {
				args = append(args, "--train-images", strconv.Itoa(o.trainImages))
			}
			runs = append(runs, gridRun{ID: fmt.Sprintf("%s/seed%d", s.name, seed), Strategy: s.name, Label: s.label, Seed: seed,
				Args: append(args, s.args(o.epochs)...)})
		}
	}
	return runs, nil
}

func countDone(runs []gridRun, done map[string]runRecord) int {
	n := 0
	for _, r := range runs {
		if _, ok := done[r.ID]; ok {
			n++
		}
	}
	return n
}

// runRecord is what a run measured, one line of runs.jsonl.
type runRecord struct {
	Record   string   `json:"record"`
	ID       string   `json:"id"`
	Strategy string   `json:"strategy"`
	Label    string   `json:"label"`
	Seed     uint64   `json:"seed"`
	Args     []string `json:"args"`
	Model    string   `json:"model"`
	Workers  int      `json:"workers"`
	// Jobs is how many runs went at once, and Cores this process's
	// GOMAXPROCS: the share of the machine the workers had.
	Jobs  int `json:"jobs"`
	Cores int `json:"cores"`
	// Params is the model's number of parameters (float32).
	Params int     `json:"params"`
	Epochs int     `json:"epochs"`
	Steps  int     `json:"steps"`
	Wall   float64 `json:"wall_s"`
	// EvalTime is the part of Wall spent evaluating on the test set.
	EvalTime float64 `json:"eval_s"`
	// TestAcc is the final test accuracy; Curve the test accuracy after
	// each epoch.
	TestAcc float64    `json:"test_acc"`
	Curve   []epochAcc `json:"curve"`
	// H is the length of each round of a local-update strategy, by the
	// step that closed it.
	H    []roundH        `json:"h,omitempty"`
	Comm train.CommStats `json:"comm"`
	// Kind is flock train's --strategy; Pattern and Topology how its
	// synchronizations travel (train.CommPattern).
	Kind     string `json:"kind"`
	Pattern  string `json:"pattern,omitempty"`
	Topology string `json:"topology,omitempty"`
}

type epochAcc struct {
	Epoch int     `json:"epoch"`
	Acc   float64 `json:"acc"`
}

type roundH struct {
	Step int `json:"step"`
	H    int `json:"h"`
}

// readRuns reads the records of runs.jsonl by ID; a missing file holds
// none. A last line without its newline, cut short by a crash, is left out
// (and dropped from the file when the grid appends to it).
func readRuns(path string) (map[string]runRecord, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]runRecord{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	done := map[string]runRecord{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var r runRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Record != "run" || r.ID == "" {
			return nil, fmt.Errorf("%s:%d: not a run record (%v)", path, line, err)
		}
		if r.Pattern == "" {
			// Written before records held the pattern: its flags say it.
			cfg, o := train.DefaultConfig(), defaultTrainOptions()
			if err := trainFlags(&cfg, &o).Parse(r.Args); err != nil {
				return nil, fmt.Errorf("%s:%d: flags %q: %w", path, line, r.Args, err)
			}
			o.strategySettings(&cfg)
			pat := train.PatternOf(cfg.Strategy)
			r.Pattern, r.Topology = pat.Kind, pat.Graph
		}
		done[r.ID] = r
	}
	return done, sc.Err()
}

// openRuns opens runs.jsonl for appending, first dropping a last line
// that a crash left without its newline, so that the next record starts
// on a line of its own.
func openRuns(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err == nil {
		if n := int64(bytes.LastIndexByte(data, '\n') + 1); n < int64(len(data)) {
			err = f.Truncate(n)
		}
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekEnd)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// grid runs the runs not yet done, jobs at a time, appending each record
// to path as it finishes.
type grid struct {
	runs              []gridRun
	done              map[string]runRecord
	path              string
	jobs              int
	trainSet, testSet *dataset.Images
	progress          *gridProgress

	mu sync.Mutex
}

func (g *grid) run(ctx context.Context) error {
	var todo []gridRun
	for _, r := range g.runs {
		if _, ok := g.done[r.ID]; !ok {
			todo = append(todo, r)
		}
	}
	g.progress.start(len(g.runs), len(g.runs)-len(todo), g.jobs)
	if len(todo) == 0 {
		return nil
	}
	f, err := openRuns(g.path)
	if err != nil {
		return err
	}
	defer f.Close()

	// A run that fails is reported and left out of runs.jsonl, so that
	// the next start tries it again; the others go on. Writing runs.jsonl
	// failing, or an interrupt, stops the grid.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan gridRun)
	var (
		wg       sync.WaitGroup
		failed   []string
		writeErr error
	)
	for range min(g.jobs, len(todo)) {
		wg.Go(func() {
			for r := range queue {
				g.progress.begin(r)
				rec, err := g.train(ctx, r)
				if err != nil {
					g.progress.end(r, nil)
					if ctx.Err() != nil {
						continue
					}
					slog.Error("flock experiment: run failed", "run", r.ID, "err", err)
					g.mu.Lock()
					failed = append(failed, r.ID)
					g.mu.Unlock()
					continue
				}
				line, err := json.Marshal(rec)
				g.mu.Lock()
				if err == nil {
					_, err = f.Write(append(line, '\n'))
				}
				if err == nil {
					err = f.Sync()
				}
				if err == nil {
					g.done[r.ID] = rec
				} else if writeErr == nil {
					writeErr = fmt.Errorf("write %s: %w", g.path, err)
					cancel()
				}
				g.mu.Unlock()
				g.progress.end(r, &rec)
			}
		})
	}
	for _, r := range todo {
		select {
		case queue <- r:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(queue)
	wg.Wait()
	g.progress.finish()
	switch {
	case writeErr != nil:
		return writeErr
	case ctx.Err() != nil:
		return ctx.Err()
	case len(failed) > 0:
		slices.Sort(failed)
		return fmt.Errorf("%d of %d runs failed (%s); the others are in %s, and the same command tries the failed ones again", len(failed), len(todo), strings.Join(failed, ", "), g.path)
	}
	return nil
}

// train runs r as flock train does (job.Run on in-process workers) and
// keeps what the report needs: the test accuracy and time of each
// evaluation, the rounds' H, and the summary.
func (g *grid) train(ctx context.Context, r gridRun) (runRecord, error) {
	cfg, o := train.DefaultConfig(), defaultTrainOptions()
	if err := trainFlags(&cfg, &o).Parse(r.Args); err != nil {
		return runRecord{}, err
	}
	o.strategySettings(&cfg)
	if err := cfg.Validate(); err != nil {
		return runRecord{}, err
	}
	params, err := modelParams(cfg.Model)
	if err != nil {
		return runRecord{}, err
	}
	rec := runRecord{Record: "run", ID: r.ID, Strategy: r.Strategy, Label: r.Label, Seed: r.Seed, Args: r.Args,
		Model: cfg.Model, Workers: o.workers, Jobs: g.jobs, Cores: runtime.GOMAXPROCS(0), Params: params, Kind: cfg.Strategy.Name}
	pat := train.PatternOf(cfg.Strategy)
	rec.Pattern, rec.Topology = pat.Kind, pat.Graph
	sets := &trainSets{train: g.trainSet, test: g.testSet}
	spec := job.Spec{
		Config: cfg, Comms: dist.NewLocal(o.workers), Build: sets.trainer, StepsPerEpoch: sets.stepsPerEpoch(cfg, o.workers), Test: true,
		MaxNonFiniteSteps: o.divergedSteps,
		OnRecord: func(v train.Record) {
			switch v.Kind {
			case train.KindEval:
				rec.Curve = append(rec.Curve, epochAcc{v.Epoch, v.Acc})
				if v.ImagesPerSec > 0 {
					rec.EvalTime += float64(g.testSet.N) / v.ImagesPerSec
				}
			case train.KindSync:
				if v.H > 0 {
					rec.H = append(rec.H, roundH{v.Step, v.H})
				}
			}
		},
	}
	res, err := job.Run(ctx, spec)
	switch {
	case ctx.Err() != nil:
		return runRecord{}, ctx.Err()
	case err != nil:
		return runRecord{}, fmt.Errorf("flock train %s: %w", strings.Join(r.Args, " "), err)
	case res.Interrupted:
		return runRecord{}, fmt.Errorf("flock train %s: interrupted after step %d of %d", strings.Join(r.Args, " "), res.Step, res.TotalSteps)
	}
	s := res.Summary
	if !s.Evaluated || s.Comm == nil {
		return runRecord{}, fmt.Errorf("flock train %s: no test accuracy or no communication in the summary", strings.Join(r.Args, " "))
	}
	rec.Epochs, rec.Steps, rec.Wall, rec.TestAcc, rec.Comm = s.Epochs, s.Steps, s.Wall.Seconds(), s.TestAcc, *s.Comm
	return rec, nil
}

// modelParams is the number of parameters of the model name on
// Fashion-MNIST.
func modelParams(name string) (int, error) {
	m, err := models.Build(name, models.FashionMNIST, tensor.NewGenerator(1))
	if err != nil {
		return 0, err
	}
	return nn.NumParameters(m), nil
}

// gridProgress shows how far the grid is: runs done, running, and the
// time left at the mean duration of the runs this process finished. On a
// terminal one line is redrawn; otherwise a line is written per run.
type gridProgress struct {
	w        io.Writer
	terminal bool

	mu                         sync.Mutex
	total, done, skipped, jobs int
	running                    map[string]time.Time
	spent                      time.Duration
	finished                   int
}

func newGridProgress(w io.Writer, terminal bool) *gridProgress {
	return &gridProgress{w: w, terminal: terminal, running: map[string]time.Time{}}
}

func (p *gridProgress) start(total, done, jobs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.done, p.skipped, p.jobs = total, done, done, jobs
	if done > 0 {
		fmt.Fprintf(p.w, "%d of %d runs already done\n", done, total)
	}
}

func (p *gridProgress) begin(r gridRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[r.ID] = time.Now()
	p.draw("")
}

// end marks r finished; rec is nil when it failed.
func (p *gridProgress) end(r gridRun, rec *runRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	began := p.running[r.ID]
	delete(p.running, r.ID)
	if rec == nil {
		return
	}
	p.done++
	p.finished++
	p.spent += time.Since(began)
	p.draw(fmt.Sprintf("%-26s test acc %6.2f%%  sent %-10s  %s", r.ID, 100*rec.TestAcc, byteSize(rec.Comm.Sent), seconds(rec.Wall)))
}

// eta is the time left: the runs left at the mean time of those finished,
// jobs at a time.
func (p *gridProgress) eta() string {
	if p.finished == 0 {
		return "ETA -"
	}
	left := p.total - p.done
	per := p.spent / time.Duration(p.finished)
	return "ETA " + (per * time.Duration(left) / time.Duration(max(1, p.jobs))).Round(time.Second).String()
}

// draw shows the state, after the line finished when it is not empty.
func (p *gridProgress) draw(finished string) {
	state := fmt.Sprintf("runs %d/%d done, %d running, %s", p.done, p.total, len(p.running), p.eta())
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
		if finished != "" {
			fmt.Fprintln(p.w, finished)
		}
		if len(p.running) > 0 {
			state += " — " + strings.Join(slices.Sorted(maps.Keys(p.running)), ", ")
		}
		fmt.Fprint(p.w, state)
		return
	}
	if finished != "" {
		fmt.Fprintf(p.w, "%s  [%s]\n", finished, state)
	}
}

func (p *gridProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "runs %d/%d done\n", p.done, p.total)
}
