package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/bench"
)

// modelWorker is the internal subcommand that makes one measurement of
// flock bench model in a fresh process, so that each has its own peak
// memory.
const modelWorker = "model-worker"

func init() {
	benchmarks = append(benchmarks, benchmark{"model", "training-step time, images/s, FLOPs and memory of a model,\n             optionally side by side with PyTorch", runBenchModel})
}

type modelOptions struct {
	models, peer, python, script, out                     string
	batch, image, channels, classes, warmup, steps, pairs int
	peak                                                  float64
	timeout                                               time.Duration
	json                                                  bool
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
	rep := newBenchReport("model", o.json, stdout, stderr)
	if len(peers) > 0 && !peerScript("model", o.script, stderr) {
		return exitFailure
	}
	peerArgv := map[string][]string{}
	for _, p := range peers {
		python, err := peerPython(p, o.python)
		if err != nil {
			return rep.fail(err)
		}
		peerArgv[p] = []string{python, o.script}
		if p == bench.ImplTorch2Compile {
			peerArgv[p] = append(peerArgv[p], "--compile")
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return rep.fail(err)
	}
	peak, peakHow := o.peak, "given by --peak-gflops"
	if peak == 0 {
		threads := runtime.GOMAXPROCS(0)
		peak = measurePeaks([]int{threads})[threads]
		peakHow = fmt.Sprintf("measured by independent FMAs on %d threads, %s", threads, cpu.KernelPath())
		if peak == 0 {
			peakHow = "not measured (pure-Go kernels)"
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now().UTC()
	machine := machineRecord("model", args, start, map[string]any{
		"peak_gflops": peak, "peak_estimate": peakHow, "pairs": o.pairs,
	})
	if len(peers) > 0 {
		cmds := map[string]string{}
		for p, argv := range peerArgv {
			cmds[p] = strings.Join(argv, " ")
		}
		machine["peer_commands"] = cmds
	}
	rep.machine(machine)
	common := []string{"--batch", strconv.Itoa(o.batch), "--image", strconv.Itoa(o.image), "--channels", strconv.Itoa(o.channels),
		"--classes", strconv.Itoa(o.classes), "--warmup", strconv.Itoa(o.warmup), "--steps", strconv.Itoa(o.steps)}
	var records []modelRecord
	names := strings.Split(o.models, ",")
	for round := 0; round <= o.pairs; round++ {
		for _, name := range names {
			for _, impl := range append([]string{"flock"}, peers...) {
				argv := append([]string{exe, "bench", modelWorker, "--model", name}, common...)
				if impl != "flock" {
					argv = append(append(slices.Clone(peerArgv[impl]), "--model", name), common...)
				}
				r, err := runModelMeasurement(ctx, argv, o.timeout, stderr)
				if err != nil {
					return rep.failRun(ctx, fmt.Errorf("%s %s: %w", impl, name, err))
				}
				r.Impl, r.Round, r.Warmup = impl, round, round == 0
				if impl != "flock" {
					// The peer's FLOPs are those of the same architecture.
					if f := lastFlock(records, name); f != nil {
						r.ForwardFLOPs, r.StepFLOPs = f.ForwardFLOPs, f.StepFLOPs
						r.GFLOPS = r.StepFLOPs * float64(r.Batch) / (r.StepMs / 1000) / 1e9
					}
				}
				if peak > 0 {
					r.PeakFraction = r.GFLOPS / peak
				}
				records = append(records, r)
				rep.measurement(r, round, r.Warmup, "%-14s %-14s %8.1f img/s  step %8.2f ms", impl, name, r.ImagesPerSec, r.StepMs)
			}
		}
	}
	sums := summarizeModels(records, names, peers)
	_ = summaries(rep, sums, func(s modelSummary) any { return s }, func(w io.Writer) error {
		writeModelTable(w, sums, peers, peak, peakHow)
		return nil
	})
	if o.out != "" {
		if err := writeModelResults(o.out, machine, records, sums, peers, peak, peakHow, start); err != nil {
			return rep.fail(err)
		}
	}
	return exitOK
}

// modelRecord is one run's measurement as flock's worker or the PyTorch
// script reports it, with the round it belongs to.
type modelRecord struct {
	Impl   string `json:"impl"`
	Round  int    `json:"round"`
	Warmup bool   `json:"warmup_round"`
	bench.ModelStepResult
	PeakFraction float64 `json:"peak_fraction,omitempty"`
	// Version is the peer's PyTorch version; CompileS the seconds
	// torch.compile took in its untimed first step, beyond a timed step.
	Version  string  `json:"version,omitempty"`
	CompileS float64 `json:"compile_s,omitempty"`
}

func lastFlock(rs []modelRecord, name string) *modelRecord {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Impl == "flock" && rs[i].Model == name {
			return &rs[i]
		}
	}
	return nil
}

func runModelMeasurement(ctx context.Context, argv []string, timeout time.Duration, stderr io.Writer) (modelRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS=1")
	cmd.Env = slicesDeleteEnv(cmd.Env, "OPENBLAS_CORETYPE")
	if err := cmd.Run(); err != nil {
		return modelRecord{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	var r modelRecord
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return modelRecord{}, fmt.Errorf("%s: reading its record: %w", strings.Join(argv, " "), err)
	}
	return r, nil
}

// slicesDeleteEnv removes the variable key from env, so that a peer
// chooses its own default (OPENBLAS_CORETYPE unset lets OpenBLAS use
// AVX-512; see BENCHMARKS.md).
func slicesDeleteEnv(env []string, key string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
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

// modelSummary gives, for one model, the medians (min–max) over the
// measured rounds and, for each peer, the round-by-round ratio flock/peer
// of images/s.
type modelSummary struct {
	Record string             `json:"record"` // "summary"
	Model  string             `json:"model"`
	Flock  modelStats         `json:"flock"`
	Peers  []modelPeerSummary `json:"peers,omitempty"`
}

// modelPeerSummary is one peer's part of a modelSummary.
type modelPeerSummary struct {
	Impl    string `json:"impl"`
	Version string `json:"version"`
	modelStats
	Ratio bench.Stats `json:"ratio_flock_img_per_s"`
	// CompileS is the median of the runs' compilation seconds
	// (torch2-compile), left out of their timed steps.
	CompileS float64 `json:"compile_s,omitempty"`
}

type modelStats struct {
	ImagesPerSec bench.Stats `json:"img_per_s"`
	ForwardMs    float64     `json:"forward_ms"`
	BackwardMs   float64     `json:"backward_ms"`
	OptimizerMs  float64     `json:"optimizer_ms"`
	StepMs       float64     `json:"step_ms"`
	GFLOPS       float64     `json:"gflops"`
	PeakFraction float64     `json:"peak_fraction"`
	PeakRSS      int64       `json:"peak_rss_bytes"`
	ForwardFLOPs float64     `json:"forward_flops"`
	StepFLOPs    float64     `json:"step_flops"`
	Params       int         `json:"params"`
}

func summarizeModels(rs []modelRecord, names []string, peers []string) []modelSummary {
	var out []modelSummary
	for _, name := range names {
		s := modelSummary{Record: "summary", Model: name, Flock: statsOf(rs, name, "flock")}
		byRound := map[int]float64{}
		for _, r := range rs {
			if r.Model == name && r.Impl == "flock" && !r.Warmup {
				byRound[r.Round] = r.ImagesPerSec
			}
		}
		for _, peer := range peers {
			p := modelPeerSummary{Impl: peer, modelStats: statsOf(rs, name, peer)}
			var ratios, compile []float64
			for _, r := range rs {
				if r.Model != name || r.Impl != peer {
					continue
				}
				p.Version = r.Version
				if r.CompileS > 0 {
					compile = append(compile, r.CompileS)
				}
				if f, ok := byRound[r.Round]; ok {
					ratios = append(ratios, f/r.ImagesPerSec)
				}
			}
			p.Ratio = bench.StatsOf(ratios)
			if len(compile) > 0 {
				p.CompileS = bench.Median(compile)
			}
			s.Peers = append(s.Peers, p)
		}
		out = append(out, s)
	}
	return out
}

func statsOf(rs []modelRecord, name, impl string) modelStats {
	var ips, f, b, o, st, gf, pf []float64
	var s modelStats
	for _, r := range rs {
		if r.Model != name || r.Impl != impl || r.Warmup {
			continue
		}
		ips, f, b, o = append(ips, r.ImagesPerSec), append(f, r.ForwardMs), append(b, r.BackwardMs), append(o, r.OptimizerMs)
		st, gf, pf = append(st, r.StepMs), append(gf, r.GFLOPS), append(pf, r.PeakFraction)
		s.PeakRSS = max(s.PeakRSS, r.PeakRSS)
		s.ForwardFLOPs, s.StepFLOPs, s.Params = r.ForwardFLOPs, r.StepFLOPs, r.Params
	}
	s.ImagesPerSec = bench.StatsOf(ips)
	s.ForwardMs, s.BackwardMs, s.OptimizerMs, s.StepMs = bench.Median(f), bench.Median(b), bench.Median(o), bench.Median(st)
	s.GFLOPS, s.PeakFraction = bench.Median(gf), bench.Median(pf)
	return s
}

func writeModelTable(w io.Writer, sums []modelSummary, peers []string, peak float64, peakHow string) {
	fmt.Fprintf(w, "| model | impl | params | img/s median (min–max) | fwd ms | bwd ms | opt ms | step ms | GFLOP/img (step) | GFLOP/s | of peak | peak RSS |")
	if len(peers) > 0 {
		fmt.Fprint(w, " flock/impl img/s |")
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	if len(peers) > 0 {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	row := func(model, impl string, s modelStats, ratio *bench.Stats) {
		fmt.Fprintf(w, "| %s | %s | %d | %.1f (%.1f–%.1f) | %.1f | %.1f | %.1f | %.1f | %.3g | %.1f | %.1f%% | %.2f GiB |",
			model, impl, s.Params, s.ImagesPerSec.Median, s.ImagesPerSec.Min, s.ImagesPerSec.Max,
			s.ForwardMs, s.BackwardMs, s.OptimizerMs, s.StepMs, s.StepFLOPs/1e9, s.GFLOPS, 100*s.PeakFraction, float64(s.PeakRSS)/(1<<30))
		switch {
		case len(peers) == 0:
		case ratio != nil:
			fmt.Fprintf(w, " %.2f (%.2f–%.2f) |", ratio.Median, ratio.Min, ratio.Max)
		default:
			fmt.Fprint(w, " |")
		}
		fmt.Fprintln(w)
	}
	for _, s := range sums {
		row(s.Model, "flock", s.Flock, nil)
		for _, p := range s.Peers {
			row(s.Model, p.Impl, p.modelStats, &p.Ratio)
		}
	}
	if peak > 0 {
		fmt.Fprintf(w, "\nPeak: %.0f GFLOP/s (%s).\n", peak, peakHow)
	}
	for _, s := range sums {
		for _, p := range s.Peers {
			if p.CompileS > 0 {
				fmt.Fprintf(w, "\n%s %s: torch.compile took %.1f s (median over the runs), in an untimed step before the warm-up steps.\n", s.Model, p.Impl, p.CompileS)
			}
		}
	}
}

func writeModelResults(dir string, machine map[string]any, rs []modelRecord, sums []modelSummary, peers []string, peak float64, peakHow string, start time.Time) error {
	recs := add(add(records{machine}, rs), sums)
	return writeResults(dir, "model", start, recs, func(b *strings.Builder, jsonl string) error {
		reportHeader(b, "Training steps of models", start, machine["command"])
		if len(peers) > 0 {
			fmt.Fprintf(b, "Each round runs flock and then each peer (%s) for each model; %v rounds after one warm-up round; figures are the median (min–max) over the rounds, and the ratios are flock/peer of images/s computed round by round.\n\n",
				strings.Join(peers, ", "), machine["pairs"])
		}
		writeModelTable(b, sums, peers, peak, peakHow)
		reportMachine(b, machine)
		for _, p := range peers {
			for _, r := range rs {
				if r.Impl == p {
					fmt.Fprintf(b, "- %s: PyTorch %s (`%s`).\n", p, r.Version, machine["peer_commands"].(map[string]string)[p])
					break
				}
			}
		}
		fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
		return nil
	})
}
