package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/flockml/flock/bench"
)

// modelWorker is the internal subcommand that makes one measurement of
// flock bench model in a fresh process, so that each has its own peak
// memory.
const modelWorker = "model-worker"

type modelOptions struct {
	models, peer, python, script, out                     string
	batch, image, channels, classes, warmup, steps, pairs int
	peak                                                  float64
	timeout                                               time.Duration
	json, profile                                         bool
}

func modelFlags(o *modelOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock bench model", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.models, "model", "resnet18", "comma-separated `MODELS` registered in nn/models (see flock train --help)")
	fs.IntVar(&o.batch, "batch", 64, "images per step")
	fs.IntVar(&o.image, "image", 32, "`SIDE` of the square input images")
	fs.IntVar(&o.channels, "channels", 3, "input channels")
	fs.IntVar(&o.classes, "classes", 10, "output classes")
	fs.IntVar(&o.warmup, "warmup", 2, "untimed steps in each run")
	fs.IntVar(&o.steps, "steps", 5, "timed steps in each run (a run's figures are their medians)")
	fs.IntVar(&o.pairs, "pairs", 3, "measured rounds (≥ 1), after one warm-up round; each round runs flock (and the peer) once per model")
	fs.StringVar(&o.peer, "peer", "", "also measure `PEERS`, a comma-separated list alternating with flock: torch (Debian's PyTorch, eager), torch2 (PyTorch 2, eager), torch2-compile (PyTorch 2, torch.compile)")
	fs.StringVar(&o.python, "python", bench.DefaultPython, "Python interpreter with PyTorch and torchvision, for --peer torch (torch2 and torch2-compile use bench/peers/setup.sh's environment)")
	fs.StringVar(&o.script, "peer-script", filepath.Join("bench", "peers", "torch_model.py"), "the PyTorch peer's script")
	fs.Float64Var(&o.peak, "peak-gflops", 0, "the machine's float32 peak in GFLOP/s for the fraction-of-peak column (default: measured as flock bench gemm does, by independent FMAs on all threads)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "limit of each run")
	fs.BoolVar(&o.json, "json", false, "write JSON Lines records to stdout instead of the table")
	fs.BoolVar(&o.profile, "profile", false, "instead of the comparison, time each model's kernel calls by kind (the matrix products and convolutions by shape) over --steps steps in this process, and print them, the longest first")
	fs.StringVar(&o.out, "out", "", "also write model_<date>.jsonl and model_<date>.md into `DIR` (e.g. bench/results)")
	return fs
}

func benchModelHelp(w io.Writer) {
	var o modelOptions
	fs := modelFlags(&o)
	fmt.Fprint(w, `Usage: flock bench model [flags]

Measure training steps of a model on one fixed batch of random images:
forward (model and mean cross-entropy), backward, and the SGD update
(momentum 0.9), each a median over the timed steps of a run, with
images/s = batch / median step time. FLOPs per image are counted from the
matrix products and convolutions that ran (2 per multiply-add), giving the
step's GFLOP/s and its fraction of the machine's peak. Every run is a fresh
process, so its peak resident memory is the model's.

With --peer every round also runs bench/peers/torch_model.py (the same
architecture in PyTorch, 2 threads) right after flock, once for each peer
of the list, and the table gives the median and range of the round-by-round
ratios flock/peer of images/s. The first round is a warm-up and is left out
of the table. The peers:

  torch           PyTorch eager, --python (Debian's PyTorch 1.13)
  torch2          PyTorch 2 eager
  torch2-compile  PyTorch 2, the model under torch.compile (inductor, C++ on
                  the CPU); it compiles in an untimed step of its own
                  before the warm-up steps, reported apart

torch2 and torch2-compile run in the environment that bench/peers/setup.sh
installs (.cache/peers/venv in the repository root, or $FLOCK_PEERS_VENV).

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runBenchModel(args []string, stdout, stderr io.Writer) int {
	var o modelOptions
	fs := modelFlags(&o)
	if code, done := parseBenchFlags("model", fs, args, benchModelHelp, stdout, stderr); done {
		return code
	}
	if o.batch < 1 || o.image < 1 || o.channels < 1 || o.classes < 1 || o.warmup < 0 || o.steps < 1 || o.pairs < 1 {
		return benchUsage(stderr, "model", "batch %d, image %d, channels %d, classes %d, warmup %d, steps %d, pairs %d: want warmup ≥ 0 and the rest ≥ 1",
			o.batch, o.image, o.channels, o.classes, o.warmup, o.steps, o.pairs)
	}
	peers, err := bench.ParsePeers(o.peer, []string{bench.ImplTorch, bench.ImplTorch2, bench.ImplTorch2Compile})
	if err != nil {
		return benchUsage(stderr, "model", "%v", err)
	}
	if o.profile {
		if len(peers) > 0 {
			return benchUsage(stderr, "model", "--profile measures flock alone: drop --peer")
		}
		return profileModels(o, stdout, stderr)
	}
	rep := newBenchReport("model", o.json, stdout, stderr)
	if len(peers) > 0 && !peerScript("model", o.script, stderr) {
		return exitFailure
	}
	cmp := bench.ModelComparison{
		Models: strings.Split(o.models, ","), Pairs: o.pairs, Peers: peers, PeerCommands: map[string][]string{},
		Step: bench.ModelStepConfig{Batch: o.batch, Image: o.image, Channels: o.channels, Classes: o.classes, Warmup: o.warmup, Steps: o.steps},
		Peak: o.peak, PeakEstimate: "given by --peak-gflops", Timeout: o.timeout, Stderr: stderr,
	}
	for _, p := range peers {
		argv, err := bench.ModelPeerCommand(p, o.python, o.script)
		if err != nil {
			return rep.fail(err)
		}
		cmp.PeerCommands[p] = argv
	}
	exe, err := os.Executable()
	if err != nil {
		return rep.fail(err)
	}
	cmp.Flock = []string{exe, "bench", modelWorker}
	if cmp.Peak == 0 {
		cmp.Peak, cmp.PeakEstimate = bench.MeasurePeak()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	machine, start := rep.begin(args, cmp.MachineSettings())
	ms, err := bench.RunModelComparison(ctx, cmp, func(m bench.ModelMeasurement) {
		rep.measurement(m, m.Round, m.Warmup, "%-14s %-14s %8.1f img/s  step %8.2f ms", m.Impl, m.Model, m.ImagesPerSec, m.StepMs)
	})
	if err != nil {
		return rep.failRun(ctx, err)
	}
	return rep.finish(bench.ModelResults{Machine: machine, Start: start, Config: cmp, Measurements: ms,
		Summaries: bench.SummarizeModels(ms, cmp.Models, peers)}, o.out)
}

// runModelWorker makes one measurement and prints it as JSON.
func runModelWorker(args []string, stdout, stderr io.Writer) int {
	var o modelOptions
	fs := modelFlags(&o)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "flock bench %s: %v\n", modelWorker, err)
		return exitUsage
	}
	r, err := bench.MeasureModelStep(bench.ModelStepConfig{
		Model: o.models, Batch: o.batch, Image: o.image, Channels: o.channels, Classes: o.classes,
		Warmup: o.warmup, Steps: o.steps, Seed: 1,
	})
	if err != nil {
		fmt.Fprintf(stderr, "flock bench %s: %v\n", modelWorker, err)
		return exitFailure
	}
	_ = json.NewEncoder(stdout).Encode(r)
	return exitOK
}

// profileModels prints, for each model of o, the kernel time of its
// training step by kind of call.
func profileModels(o modelOptions, stdout, stderr io.Writer) int {
	for i, m := range strings.Split(o.models, ",") {
		r, err := bench.MeasureModelStep(bench.ModelStepConfig{
			Model: m, Batch: o.batch, Image: o.image, Channels: o.channels, Classes: o.classes,
			Warmup: o.warmup, Steps: o.steps, Seed: 1, Profile: true,
		})
		if err != nil {
			fmt.Fprintf(stderr, "flock bench model: %v\n", err)
			return exitFailure
		}
		if o.json {
			_ = json.NewEncoder(stdout).Encode(r)
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := bench.WriteProfile(stdout, r, 40); err != nil {
			fmt.Fprintf(stderr, "flock bench model: %v\n", err)
			return exitFailure
		}
	}
	return exitOK
}
