package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/nn/models"
)

// strategyWorker is the internal first argument of flock bench strategy
// that runs one rank of its synchronization measurement.
const strategyWorker = "sync-worker"

// The measurements of flock bench strategy.
const (
	measureSteps = "steps"
	measureSync  = "sync"
)

type strategyOptions struct {
	measure, model, peer, script, out                            string
	batch, image, channels, classes, steps, nproc, warmup, iters int
	pairs                                                        int
	timeout                                                      time.Duration
	json                                                         bool
}

func strategyFlags(o *strategyOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock bench strategy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.measure, "measure", "steps,sync", "comma-separated `MEASUREMENTS`: steps (local against single-worker steps), sync (a synchronization against an all-reduce)")
	fs.StringVar(&o.model, "model", "", "`MODEL` registered in nn/models (default: cnn for steps, resnet18 for sync)")
	fs.IntVar(&o.batch, "batch", 128, "images per step (steps)")
	fs.IntVar(&o.image, "image", 0, "`SIDE` of the square input images (default: 28 for steps, 32 for sync)")
	fs.IntVar(&o.channels, "channels", 0, "input channels (default: 1 for steps, 3 for sync)")
	fs.IntVar(&o.classes, "classes", 10, "output classes")
	fs.IntVar(&o.steps, "steps", 20, "timed training steps in each run (steps)")
	fs.IntVar(&o.nproc, "nproc", 2, "processes on this machine, ≥ 2 (sync)")
	fs.IntVar(&o.warmup, "warmup", 2, "untimed synchronizations, then untimed all-reduces, before the first pair (sync)")
	fs.IntVar(&o.iters, "iters", 5, "timed synchronizations and all-reduces in each pair (sync; a pair's figures are their medians)")
	fs.IntVar(&o.pairs, "pairs", 5, "measured pairs (≥ 1), after one warm-up pair")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit of the sync measurement's processes")
	fs.StringVar(&o.peer, "peer", "", "also measure `PEER` in alternating rounds (sync): torchft (LocalSGD and DiLoCo over Gloo)")
	fs.StringVar(&o.script, "peer-script", filepath.Join("bench", "peers", "torchft_sync.py"), "the torchft peer's script")
	fs.BoolVar(&o.json, "json", false, "write JSON Lines records to stdout instead of the table")
	fs.StringVar(&o.out, "out", "", "also write strategy_<date>.jsonl and strategy_<date>.md into `DIR` (e.g. bench/results)")
	return fs
}

func benchStrategyHelp(w io.Writer) {
	var o strategyOptions
	fs := strategyFlags(&o)
	fmt.Fprintf(w, `Usage: flock bench strategy [flags]

Measure what Local SGD (package localopt) costs against its baseline, the
two side by side in one run, alternating A B A B over the pairs after a
warm-up pair; the table gives medians (min–max) over the measured pairs
and the ratio computed pair by pair.

steps: local steps cost what single-worker steps cost. In this process,
two train.Trainers on the same synthetic images (flock train's defaults
otherwise: Nesterov SGD, cosine schedule) take the same steps, one with
train.SingleWorker and one with localopt.Local over a one-rank Comm whose
constant period outlasts the run, so that it never synchronizes. Each run
times --steps steps of Trainer.RunUntil (data loading included); the
figure is ms/step, and the ratio single/local of step times (local's
throughput as a fraction of single's) should be ≥ %.2f.

sync: one synchronization of all parameters reaches the all-reduce's bus
bandwidth. --nproc processes of this machine join as 'flock bench
allreduce' starts them (rendezvous on loopback; the records name the
transport, shared memory or TCP); each builds the model's parameters
and a localopt.Local with constant H = 1 and, in every pair, times --iters
Local.AfterStep calls that each close a round (the sampling of the
consensus distance, the in-place all-reduce (avg) of the flat buffer that
holds the parameters and two more elements, the new round's H), then
--iters plain all-reduces (avg) of a
flat float32 tensor of as many bytes S, each after a barrier. A pair's
figures are the median times T on rank 0, as bus bandwidth
2(n-1)/n · S/T in GB/s; the ratio sync/all-reduce should be ≥ %.2f.

With --peer torchft the sync measurement runs in rounds, each a fresh
flock job over TCP (FLOCK_SHM=0) and then bench/peers/torchft_sync.py:
torchft's lighthouse and --nproc replicas, each a Manager over torchft's
ProcessGroupGloo and the same model's parameters in PyTorch, timing
optimizer steps that are nothing but a LocalSGD or DiLoCo synchronization
(sync_every 1, no gradients). Every job has its warm-up pair; round 0 is a
warm-up round; the table gives ms per synchronization, median (min–max)
over the rounds, and torchft's time over flock's round by round. It runs
in the environment that bench/peers/setup.sh installs.

Flags:
`, bench.StepsTarget, bench.SyncTarget)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runBenchStrategy(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == strategyWorker {
		return runStrategyWorker(args[1:], stdout, stderr)
	}
	const name = "strategy"
	var o strategyOptions
	fs := strategyFlags(&o)
	if code, done := parseBenchFlags(name, fs, args, benchStrategyHelp, stdout, stderr); done {
		return code
	}
	measures, err := parseList(o.measure, "measure", func(s string) (string, error) {
		if s != measureSteps && s != measureSync {
			return "", fmt.Errorf("want %s or %s", measureSteps, measureSync)
		}
		return s, nil
	})
	if err != nil {
		return benchUsage(stderr, name, "%v", err)
	}
	if o.model != "" && !slices.Contains(models.Names(), o.model) {
		return benchUsage(stderr, name, "unknown model %q (models: %s)", o.model, strings.Join(models.Names(), ", "))
	}
	if o.batch < 1 || o.image < 0 || o.channels < 0 || o.classes < 1 || o.steps < 1 || o.warmup < 0 || o.iters < 1 || o.pairs < 1 {
		return benchUsage(stderr, name, "batch %d, image %d, channels %d, classes %d, steps %d, warmup %d, iters %d, pairs %d: want image, channels, warmup ≥ 0 and the rest ≥ 1",
			o.batch, o.image, o.channels, o.classes, o.steps, o.warmup, o.iters, o.pairs)
	}
	if o.nproc < 2 {
		return benchUsage(stderr, name, "nproc %d: want ≥ 2", o.nproc)
	}
	switch {
	case o.peer == "":
	case o.peer != bench.ImplTorchFT:
		return benchUsage(stderr, name, "unknown peer %q (peers: torchft)", o.peer)
	case !slices.Contains(measures, measureSync):
		return benchUsage(stderr, name, "--peer torchft compares synchronizations: want --measure with sync")
	}
	or := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	model := func(def string) string {
		if o.model == "" {
			return def
		}
		return o.model
	}
	cfg := bench.StrategyConfig{Peer: o.peer}
	if slices.Contains(measures, measureSteps) {
		cfg.Steps = &bench.StrategyStepsConfig{
			Model: model("cnn"), Batch: o.batch, Image: or(o.image, 28), Channels: or(o.channels, 1), Classes: o.classes,
			Steps: o.steps, Pairs: o.pairs, Seed: 1,
		}
	}
	if slices.Contains(measures, measureSync) {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "flock bench %s: %v\n", name, err)
			return exitFailure
		}
		cfg.Sync = &bench.StrategySyncConfig{
			StrategySyncWorkerConfig: bench.StrategySyncWorkerConfig{
				Model: model("resnet18"), Image: or(o.image, 32), Channels: or(o.channels, 3), Classes: o.classes,
				Warmup: o.warmup, Iters: o.iters, Pairs: o.pairs, Seed: 1,
			},
			NProc: o.nproc, Flock: []string{exe, "bench", name, strategyWorker}, Timeout: o.timeout, Stderr: stderr,
		}
	}

	rep := newBenchReport(name, o.json, stdout, stderr)
	if o.peer != "" {
		if !peerScript(name, o.script, stderr) {
			return exitFailure
		}
		if cfg.PeerCommand, err = bench.TorchFTCommand(*cfg.Sync, o.script); err != nil {
			return rep.fail(err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	machine, start := rep.begin(args, cfg.MachineSettings())
	const syncLine = "sync   %-16s %-8s %d ranks %.2f MB  %9.3f ms  busbw %6.3f GB/s"
	res, err := bench.RunStrategy(ctx, cfg, func(m any) {
		switch m := m.(type) {
		case bench.StrategyStepsMeasurement:
			rep.measurement(m, m.Pair, m.WarmupPair, "steps  %-6s %-8s batch %d  %8.2f ms/step  %9.1f img/s",
				m.Impl, m.Model, m.Batch, m.MsPerStep, m.ImagesPerSec)
		case bench.StrategySyncMeasurement:
			rep.measurement(m, m.Pair, m.WarmupPair, syncLine, m.Impl, m.Model, m.NProc, float64(m.Bytes)/1e6, m.MedianS*1e3, m.BusBW)
		case bench.TorchFTMeasurement:
			rep.measurement(m, m.Pair, m.WarmupPair, syncLine, m.Impl, m.Model, m.NProc, float64(m.Bytes)/1e6, m.MedianS*1e3, m.BusBW)
		}
	})
	if err != nil {
		return rep.failRun(ctx, err)
	}
	res.Machine, res.Start = machine, start
	return rep.finish(res, o.out)
}

// runStrategyWorker is one rank of the sync measurement:
// bench.RunStrategySyncWorker with the flags its parent gives.
func runStrategyWorker(args []string, stdout, stderr io.Writer) int {
	const name = "strategy " + strategyWorker
	var cfg bench.StrategySyncWorkerConfig
	fs := flag.NewFlagSet("flock bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Model, "model", "resnet18", "model")
	fs.IntVar(&cfg.Image, "image", 32, "side of the square input images")
	fs.IntVar(&cfg.Channels, "channels", 3, "input channels")
	fs.IntVar(&cfg.Classes, "classes", 10, "output classes")
	fs.IntVar(&cfg.Warmup, "warmup", 2, "untimed operations of each kind")
	fs.IntVar(&cfg.Iters, "iters", 5, "timed operations of each kind per pair")
	fs.IntVar(&cfg.Pairs, "pairs", 5, "measured pairs after the warm-up pair")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the initial weights")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flock bench %s: unexpected argument %q\n", name, fs.Arg(0))
		return exitUsage
	}
	return runWorker(name, stderr, func(ctx context.Context) error { return bench.RunStrategySyncWorker(ctx, cfg, stdout) })
}
