package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/flockml/flock/experiment"
	"github.com/flockml/flock/internal/term"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/netmodel"
	"github.com/flockml/flock/train"
)

func init() {
	extraCommands = append(extraCommands, command{"experiment", "run a grid of training runs and report accuracy against communication", runExperiment, experimentHelp})
}

// The defaults of the full grid: about 17 minutes on two idle cores, well
// inside the 90 that a full grid may take (see experimentHelp).
const (
	expDefaultEpochs = 3
	expDefaultSeeds  = "1,2,3"
	expDefaultOut    = "bench/results/strategies"
)

type experimentOptions struct {
	model, seeds, only, out, data, network, allreduce string
	nodeNetwork                                       string
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
	fs.BoolVar(&o.quick, "quick", false, "a grid of seconds: "+strings.Join(experiment.QuickStrategies, ", ")+"; 2 workers, 1 epoch on 2048 images, seed 1 (other flags given still apply)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list the runs, marking those already done, and exit")
	fs.BoolVar(&o.report, "report-only", false, "write the report from the runs already in runs.jsonl, training nothing")
	fs.StringVar(&o.network, "network", "10gbe", "network of the projection, one of the networks above; --latency, --bandwidth, --allreduce override its values")
	fs.Float64Var(&o.latency, "latency", -1, "α of the projection's network, in `SECONDS` (e.g. 25e-6; negative: the preset's)")
	fs.Float64Var(&o.bandwidth, "bandwidth", 0, "β of the projection's network, in `BYTES/S` per link and direction (e.g. 1.25e9; 0: the preset's)")
	fs.StringVar(&o.nodeNetwork, "node-network", "nvlink", "network of a node's workers, on which the projection puts the inner level of two-level runs")
	fs.StringVar(&o.allreduce, "allreduce", "", "all-reduce of the projection: ring or halving-doubling (default: the preset's)")
	fs.IntVar(&o.scale, "scale", 64, "nodes `P` of the projection (one worker each)")
	fs.Float64Var(&o.stepTime, "step-time", 0, "compute time of one step at scale in `SECONDS` (0: measured, see below)")
	return fs
}

func experimentHelp(w io.Writer) {
	var o experimentOptions
	fs := experimentFlags(&o)
	fmt.Fprint(w, `Usage: flock experiment strategies [flags]
       flock experiment qsr|decentralized|jointspar [flags]   (studies; see flock experiment qsr --help)

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
	for _, s := range experiment.StrategyGrid {
		fmt.Fprintf(w, "  %-19s %s\n", s.Name, strings.Join(s.Args(expDefaultEpochs), " "))
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
`, len(experiment.StrategyGrid), expDefaultEpochs)
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
	if len(args) > 0 {
		if _, ok := experiment.Studies[args[0]]; ok {
			return runStudy(args[0], args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || args[0] != "strategies" {
		return expUsage(stderr, "want the experiment 'strategies', 'qsr', 'decentralized' or 'jointspar'")
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
			o.only = strings.Join(experiment.QuickStrategies, ",")
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
	done, err := experiment.ReadRecords(path, flagsPattern)
	if err != nil {
		fmt.Fprintf(stderr, "flock experiment: %v\n", err)
		return exitFailure
	}
	if o.dryRun {
		listRuns(stdout, runs, done, 26)
		fmt.Fprintf(stdout, "%d runs, %d done in %s\n", len(runs), experiment.CountDone(runs, done), path)
		return exitOK
	}
	if !sameArgs(runs, done, path, stderr) {
		return exitFailure
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
		sets := job.Images{Train: trainSet, Test: testSet}
		g := &experiment.Grid{Runs: runs, Done: done, Path: path, Jobs: o.jobs, Setup: gridSetup,
			Build: sets.Build, StepsPerEpoch: sets.StepsPerEpoch, TestImages: testSet.N,
			Progress: experiment.NewProgress(stdout, term.IsTerminal(stdout))}
		if err := g.Run(ctx); err != nil {
			return gridFailed(ctx, err, path, stderr)
		}
	}
	var recs []experiment.Record
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
	node, err := netmodel.Preset(o.nodeNetwork)
	if err != nil {
		return expUsage(stderr, "node-network: %v", err)
	}
	rep := experiment.Project(recs, net, node, o.scale, o.stepTime)
	if err := experiment.WriteReport(o.out, command, net, o.scale, rep); err != nil {
		fmt.Fprintf(stderr, "flock experiment: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(o.out, "report.md"))
	return exitOK
}

// listRuns prints runs as flock train command lines, marking those in
// done, their IDs in a column of width characters.
func listRuns(w io.Writer, runs []experiment.Run, done map[string]experiment.Record, width int) {
	for _, r := range runs {
		mark := "  "
		if _, ok := done[r.ID]; ok {
			mark = "✓ "
		}
		fmt.Fprintf(w, "%s%-*s flock train %s\n", mark, width, r.ID, strings.Join(r.Args, " "))
	}
}

// sameArgs reports whether every run of runs recorded in done (read from
// path) was made with its flags, saying which was not.
func sameArgs(runs []experiment.Run, done map[string]experiment.Record, path string, stderr io.Writer) bool {
	for _, r := range runs {
		if d, ok := done[r.ID]; ok && !slices.Equal(d.Args, r.Args) {
			fmt.Fprintf(stderr, "flock experiment: %s holds run %s with other flags (%s); use another --out\n", path, r.ID, strings.Join(d.Args, " "))
			return false
		}
	}
	return true
}

// gridFailed reports err, a grid's failure, and returns the exit status:
// an interruption says how to continue.
func gridFailed(ctx context.Context, err error, path string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "flock experiment: %v\n", err)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "flock experiment: interrupted; the runs finished are in %s, and the same command continues\n", path)
		return exitInterrupted
	}
	return exitFailure
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

// experimentRuns lists the runs o asks for, strategy by strategy.
func experimentRuns(o experimentOptions) ([]experiment.Run, error) {
	g := experiment.GridOptions{Model: o.model, Workers: o.workers, Epochs: o.epochs, Batch: o.batch, TrainImages: o.trainImages}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	var err error
	if g.Seeds, err = parseList(o.seeds, "seeds", func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }); err != nil {
		return nil, err
	}
	if o.only != "" {
		if g.Strategies, err = parseList(o.only, "strategies", func(s string) (string, error) {
			if !experiment.InStrategyGrid(s) {
				return "", errors.New("not in the grid")
			}
			return s, nil
		}); err != nil {
			return nil, err
		}
	}
	return experiment.StrategyRuns(g)
}

// gridSetup is the configuration of a run of the grid: what flock train
// would run with its flags.
func gridSetup(r experiment.Run) (experiment.Setup, error) {
	cfg, o := train.DefaultConfig(), defaultTrainOptions()
	if err := trainFlags(&cfg, &o).Parse(r.Args); err != nil {
		return experiment.Setup{}, err
	}
	o.strategySettings(&cfg)
	return experiment.Setup{Config: cfg, Workers: o.workers, MaxNonFiniteSteps: o.divergedSteps}, nil
}

// flagsPattern is the communication pattern of the run that flock train's
// flags args describe.
func flagsPattern(args []string) (train.CommPattern, error) {
	set, err := gridSetup(experiment.Run{Args: args})
	if err != nil {
		return train.CommPattern{}, err
	}
	return train.PatternOf(set.Config.Strategy), nil
}
