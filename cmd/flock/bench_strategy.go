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
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/dist"
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

func init() {
	benchmarks = append(benchmarks, benchmark{"strategy", "cost of the training strategies: Local SGD's local steps against\n             single-worker steps, its synchronization against an all-reduce", runBenchStrategy})
}

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

// strategyRuns are the settings of each measurement once the defaults
// that depend on it are filled in.
type strategyRuns struct {
	steps *bench.StrategyStepsConfig
	sync  *bench.StrategySyncConfig
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
	var runs strategyRuns
	if slices.Contains(measures, measureSteps) {
		runs.steps = &bench.StrategyStepsConfig{
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
		runs.sync = &bench.StrategySyncConfig{
			StrategySyncWorkerConfig: bench.StrategySyncWorkerConfig{
				Model: model("resnet18"), Image: or(o.image, 32), Channels: or(o.channels, 3), Classes: o.classes,
				Warmup: o.warmup, Iters: o.iters, Pairs: o.pairs, Seed: 1,
			},
			NProc: o.nproc, Flock: []string{exe, "bench", name, strategyWorker}, Timeout: o.timeout, Stderr: stderr,
		}
	}

	rep := newBenchReport(name, o.json, stdout, stderr)
	var peerArgv []string
	if o.peer != "" {
		if !peerScript(name, o.script, stderr) {
			return exitFailure
		}
		python, err := peerPython(o.peer, "")
		if err != nil {
			return rep.fail(err)
		}
		c := runs.sync
		peerArgv = []string{python, o.script, "--model", c.Model, "--image", strconv.Itoa(c.Image), "--channels", strconv.Itoa(c.Channels),
			"--classes", strconv.Itoa(c.Classes), "--nproc", strconv.Itoa(c.NProc), "--warmup", strconv.Itoa(c.Warmup), "--iters", strconv.Itoa(c.Iters)}
		// flock over TCP, as torchft's Gloo.
		if old, ok := os.LookupEnv("FLOCK_SHM"); ok {
			defer os.Setenv("FLOCK_SHM", old)
		} else {
			defer os.Unsetenv("FLOCK_SHM")
		}
		os.Setenv("FLOCK_SHM", "0")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now().UTC()
	extra := strategyMachine(runs)
	if o.peer != "" {
		extra["peer"], extra["peer_command"] = o.peer, strings.Join(peerArgv, " ")
	}
	machine := machineRecord(name, args, start, extra)
	rep.machine(machine)
	var (
		stepsMs []bench.StrategyStepsMeasurement
		syncMs  []bench.StrategySyncMeasurement
		sums    []map[string]any
		tables  []func(io.Writer) error
	)
	if c := runs.steps; c != nil {
		stepsMs, err = bench.RunStrategySteps(ctx, *c, func(m bench.StrategyStepsMeasurement) {
			rep.measurement(m, m.Pair, m.WarmupPair, "steps  %-6s %-8s batch %d  %8.2f ms/step  %9.1f img/s",
				m.Impl, m.Model, m.Batch, m.MsPerStep, m.ImagesPerSec)
		})
		if err != nil {
			return rep.failRun(ctx, err)
		}
		s := bench.SummarizeStrategySteps(stepsMs)
		sums = append(sums, strategyStepsRecord(s))
		tables = append(tables, func(w io.Writer) error { return bench.WriteStrategyStepsTable(w, s) })
	}
	var peerMs []torchftRecord
	if c := runs.sync; c != nil {
		emit := func(m bench.StrategySyncMeasurement) {
			rep.measurement(m, m.Pair, m.WarmupPair, "sync   %-16s %-8s %d ranks %.2f MB  %9.3f ms  busbw %6.3f GB/s",
				m.Impl, m.Model, m.NProc, float64(m.Bytes)/1e6, m.MedianS*1e3, m.BusBW)
		}
		if o.peer == "" {
			syncMs, err = bench.RunStrategySync(ctx, *c, emit)
		} else {
			syncMs, peerMs, err = runStrategySyncTorchft(ctx, *c, peerArgv, o.pairs, o.timeout, emit, func(r torchftRecord) {
				rep.measurement(r, r.Pair, r.WarmupPair, "sync   %-16s %-8s %d ranks %.2f MB  %9.3f ms  busbw %6.3f GB/s",
					r.Impl, r.Model, r.NProc, float64(r.Bytes)/1e6, r.MedianS*1e3, r.BusBW)
			}, stderr)
		}
		if err != nil {
			return rep.failRun(ctx, err)
		}
		s := bench.SummarizeStrategySync(syncMs)
		sums = append(sums, strategySyncRecord(s))
		tables = append(tables, func(w io.Writer) error { return bench.WriteStrategySyncTable(w, s) })
		if o.peer != "" {
			ps := summarizeTorchft(syncMs, peerMs)
			sums = append(sums, torchftSummaryRecord(ps))
			tables = append(tables, func(w io.Writer) error { return writeTorchftTable(w, ps) })
		}
	}
	writeTables := func(w io.Writer) error {
		for i, t := range tables {
			if i > 0 {
				fmt.Fprintln(w)
			}
			if err := t(w); err != nil {
				return err
			}
		}
		return nil
	}
	if err := summaries(rep, sums, func(r map[string]any) any { return r }, writeTables); err != nil {
		return rep.fail(err)
	}
	if o.out != "" {
		recs := add(add(add(add(records{machine}, stepsMs), syncMs), peerMs), sums)
		err := writeResults(o.out, name, start, recs, func(b *strings.Builder, jsonl string) error {
			reportHeader(b, "Cost of Local SGD", start, machine["command"])
			if runs.steps != nil {
				fmt.Fprintf(b, "Steps: two train.Trainers in one process on the same synthetic images take the same steps, one with train.SingleWorker and one with localopt.Local over a one-rank Comm with a period longer than the run (no synchronization); each run times %d steps of Trainer.RunUntil; pairs alternate single and local, %d pairs after one warm-up pair; the ratio single/local of ms/step is computed pair by pair (target ≥ %.2f).\n\n",
					runs.steps.Steps, o.pairs, bench.StepsTarget)
			}
			if runs.sync != nil {
				fmt.Fprintf(b, "Sync: %d processes on this machine (the table names the transport); each pair times %d Local.AfterStep calls that close a round (constant H = 1: sampling of the consensus distance, in-place all-reduce avg of the flat buffer holding every parameter and two more elements) and then %d plain all-reduces (avg) of a flat float32 tensor of the same S bytes, each after a barrier; a pair's figure is the median T on rank 0, as bus bandwidth 2(n−1)/n · S/T in GB/s (10⁹ B/s); %d untimed operations of each kind first, %d pairs after one warm-up pair; the ratio sync/all-reduce is computed pair by pair (target ≥ %.2f).\n\n",
					runs.sync.NProc, o.iters, o.iters, o.warmup, o.pairs, bench.SyncTarget)
			}
			if o.peer != "" {
				fmt.Fprintf(b, "torchft: the sync measurement runs in %d rounds after a warm-up round, each a flock job over TCP (FLOCK_SHM=0) of a warm-up pair and one measured pair, then bench/peers/torchft_sync.py likewise: torchft's lighthouse and %d replicas, each a Manager (synchronous quorum) over torchft's ProcessGroupGloo on loopback with the same model's parameters in PyTorch, timing %d optimizer steps that are one LocalSGD or DiLoCo synchronization each (sync_every 1, no gradients: the quorum, the all-reduce of every parameter, DiLoCo's outer Nesterov step); figures are ms per synchronization on rank 0, median (min–max) over the rounds, and the ratio is torchft's time over flock's Local synchronization, round by round (above 1: flock faster).\n\n",
					o.pairs, runs.sync.NProc, o.iters)
			}
			if err := writeTables(b); err != nil {
				return err
			}
			reportMachine(b, machine)
			if len(peerMs) > 0 {
				fmt.Fprintf(b, "- torchft: %s (`%s`).\n", peerMs[0].Version, machine["peer_command"])
			}
			fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
			return nil
		})
		if err != nil {
			return rep.fail(err)
		}
	}
	return exitOK
}

// strategyMachine is the settings part of the machine record.
func strategyMachine(runs strategyRuns) map[string]any {
	extra := map[string]any{}
	if c := runs.steps; c != nil {
		extra["steps"] = map[string]any{"model": c.Model, "batch": c.Batch, "image": c.Image, "channels": c.Channels,
			"classes": c.Classes, "steps": c.Steps, "pairs": c.Pairs}
	}
	if c := runs.sync; c != nil {
		extra["sync"] = map[string]any{"model": c.Model, "image": c.Image, "channels": c.Channels, "classes": c.Classes,
			"nproc": c.NProc, "warmup": c.Warmup, "iters": c.Iters, "pairs": c.Pairs, "op": "avg"}
	}
	return extra
}

// statsRecord is s in a JSON record; nil when there are no figures.
func statsRecord(s bench.Stats) map[string]any {
	if s.N == 0 {
		return nil
	}
	return map[string]any{"median": s.Median, "min": s.Min, "max": s.Max, "n": s.N}
}

func strategyStepsRecord(s bench.StrategyStepsSummary) map[string]any {
	return map[string]any{
		"record": "summary", "measure": measureSteps, "model": s.Model, "params": s.Params, "batch": s.Batch, "steps": s.Steps,
		"single_ms_per_step": statsRecord(s.Single), "local_ms_per_step": statsRecord(s.Local),
		"ratio_single_local": statsRecord(s.Ratio), "target": bench.StepsTarget,
	}
}

func strategySyncRecord(s bench.StrategySyncSummary) map[string]any {
	return map[string]any{
		"record": "summary", "measure": measureSync, "model": s.Model, "nproc": s.NProc, "bytes": s.Bytes, "transport": s.Transport,
		"sync_busbw_gbps": statsRecord(s.Sync), "allreduce_busbw_gbps": statsRecord(s.AllReduce),
		"ratio_sync_allreduce": statsRecord(s.Ratio), "target": bench.SyncTarget,
	}
}

// runStrategyWorker is one rank of the sync measurement: it joins the job
// described by the environment, as runBenchWorker does, and runs
// bench.StrategySyncWorker.
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	env, err := dist.EnvFromOS()
	if err != nil {
		fmt.Fprintf(stderr, "flock bench %s: %v\n", name, err)
		return exitFailure
	}
	c, err := dist.Init(ctx, env, dist.InitOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "flock bench %s: %v\n", name, err)
		return exitFailure
	}
	defer c.Close()
	if err := bench.StrategySyncWorker(ctx, c, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "flock bench %s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}
