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
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/bench"
)

// benchWorker is the internal subcommand that runs one rank of an
// all-reduce measurement; flock bench allreduce starts it.
const benchWorker = "allreduce-worker"

// benchmark is one measurement of flock bench.
type benchmark struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

// benchmarks lists the measurements of flock bench.
var benchmarks = []benchmark{
	{"allreduce", "all-reduce bus bandwidth over local processes, optionally\n             side by side with PyTorch's Gloo backend", runBenchAllReduce},
	{"gemm", "float32 matrix product GFLOP/s, optionally side by side with\n             numpy over OpenBLAS", runBenchGemm},
	{"loader", "images/s of the .beton data loader (decode + augment) per\n             worker, side by side with a PyTorch DataLoader", runBenchLoader},
	{"model", "training-step time, images/s, FLOPs and memory of a model,\n             optionally side by side with PyTorch", runBenchModel},
	{"strategy", "cost of the training strategies: Local SGD's local steps against\n             single-worker steps, its synchronization against an all-reduce", runBenchStrategy},
}

func benchNames() string {
	var names []string
	for _, b := range benchmarks {
		names = append(names, b.name)
	}
	return strings.Join(names, ", ")
}

func benchHelp(w io.Writer) {
	fmt.Fprint(w, "Usage: flock bench <benchmark> [flags]\n\nBenchmarks:\n")
	for _, b := range benchmarks {
		fmt.Fprintf(w, "  %-10s %s\n", b.name, b.summary)
	}
	fmt.Fprint(w, "\nRun 'flock bench <benchmark> --help' for its flags.\n")
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		benchHelp(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		benchHelp(stdout)
		return exitOK
	case benchWorker:
		return runBenchWorker(args[1:], stdout, stderr)
	case modelWorker:
		return runModelWorker(args[1:], stdout, stderr)
	}
	for _, b := range benchmarks {
		if b.name == args[0] {
			return b.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "flock bench: unknown benchmark %q (benchmarks: %s); run 'flock bench --help' for usage\n", args[0], benchNames())
	return exitUsage
}

// benchUsage prints a usage error of flock bench name and returns exitUsage.
func benchUsage(stderr io.Writer, name, format string, a ...any) int {
	fmt.Fprintf(stderr, "flock bench "+name+": "+format+"; run 'flock bench "+name+" --help' for usage\n", a...)
	return exitUsage
}

// parseBenchFlags parses the flags of flock bench name into fs: --help
// prints help on stdout, and a bad flag or a stray argument is a usage
// error. done reports that the command ends here with status code.
func parseBenchFlags(name string, fs *flag.FlagSet, args []string, help func(io.Writer), stdout, stderr io.Writer) (code int, done bool) {
	return parseFlags(fs, args, help, func(format string, a ...any) int { return benchUsage(stderr, name, format, a...) }, stdout)
}

// parseFlags parses args into fs: --help writes help to stdout, and a bad
// flag or an argument left over is reported by usage. done says whether
// the command ends there, with status code.
func parseFlags(fs *flag.FlagSet, args []string, help func(io.Writer), usage func(format string, a ...any) int, stdout io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help(stdout)
			return exitOK, true
		}
		return usage("%v", err), true
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0)), true
	}
	return 0, false
}

// positiveInts parses a comma-separated list of integers ≥ 1.
func positiveInts(s, what string) ([]int, error) {
	return parseList(s, what, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err == nil && n < 1 {
			err = errors.New("want ≥ 1")
		}
		return n, err
	})
}

type allReduceOptions struct {
	nproc, sizes, peer, python, script, out string
	pairs, warmup, iters                    int
	timeout                                 time.Duration
	json                                    bool
}

func allReduceFlags(o *allReduceOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock bench allreduce", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.nproc, "nproc", "2,4", "comma-separated world `SIZES` (processes on this machine)")
	fs.StringVar(&o.sizes, "size", "1MiB,16MiB,100MiB", "comma-separated message `SIZES` of float32 data (B, KiB, MiB, GiB, kB, MB, GB)")
	fs.StringVar(&o.peer, "peer", "", "also measure `PEER`, alternating with flock: gloo (PyTorch torch.distributed)")
	fs.IntVar(&o.pairs, "pairs", 5, "measured rounds, after one warm-up round; each round runs every implementation once per world size")
	fs.IntVar(&o.warmup, "warmup", 2, "untimed all-reduces per size in each run")
	fs.IntVar(&o.iters, "iters", 5, "timed all-reduces per size in each run (a run's figure is their median)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit of each run")
	fs.BoolVar(&o.json, "json", false, "write JSON Lines records to stdout instead of the table")
	fs.StringVar(&o.out, "out", "", "also write allreduce_<date>.jsonl and allreduce_<date>.md into `DIR` (e.g. bench/results)")
	fs.StringVar(&o.python, "python", bench.DefaultPython, "Python interpreter with PyTorch, for --peer gloo")
	fs.StringVar(&o.script, "peer-script", filepath.Join("bench", "peers", "gloo_allreduce.py"), "the Gloo peer's script")
	return fs
}

func benchAllReduceHelp(w io.Writer) {
	var o allReduceOptions
	fs := allReduceFlags(&o)
	fmt.Fprint(w, `Usage: flock bench allreduce [flags]

Measure all-reduce (sum of float32 tensors) over processes of this machine
that connect through flock's TCP backend on loopback. Each run starts the
world size's flock processes, which for every size do the warm-up
all-reduces and then the timed ones, each after a barrier; a run's figure
is the median T of its timed all-reduces of S bytes, given as

  algorithm bandwidth  S/T
  bus bandwidth        2(n-1)/n · S/T   (n processes)

in GB/s (10^9 bytes/s). With --peer gloo every round also runs
bench/peers/gloo_allreduce.py (torch.distributed, gloo backend) with the
same sizes right after flock, and the table gives the median and range of
the round-by-round ratios flock/gloo of bus bandwidth. The first round is a
warm-up and is left out of the table.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func parseList[T any](s, what string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%s %q: %v", what, f, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func runBenchAllReduce(args []string, stdout, stderr io.Writer) int {
	var o allReduceOptions
	fs := allReduceFlags(&o)
	if code, done := parseBenchFlags("allreduce", fs, args, benchAllReduceHelp, stdout, stderr); done {
		return code
	}
	nprocs, err := positiveInts(o.nproc, "nproc")
	if err != nil {
		return benchUsage(stderr, "allreduce", "%v", err)
	}
	sizes, err := parseList(o.sizes, "size", func(s string) (int64, error) {
		b, err := bench.ParseSize(s)
		if err == nil && (b <= 0 || b%4 != 0) {
			err = errors.New("want a positive multiple of 4 bytes (float32)")
		}
		return b, err
	})
	if err != nil {
		return benchUsage(stderr, "allreduce", "%v", err)
	}
	if o.peer != "" && o.peer != bench.ImplGloo {
		return benchUsage(stderr, "allreduce", "unknown peer %q (peers: gloo)", o.peer)
	}
	if o.pairs < 0 || o.warmup < 0 || o.iters < 1 {
		return benchUsage(stderr, "allreduce", "pairs %d, warmup %d, iters %d: want pairs, warmup ≥ 0 and iters ≥ 1", o.pairs, o.warmup, o.iters)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "flock bench allreduce: %v\n", err)
		return exitFailure
	}
	cfg := bench.AllReduceConfig{
		NProc: nprocs, Sizes: sizes, Pairs: o.pairs, Warmup: o.warmup, Iters: o.iters,
		Flock: []string{exe, "bench", benchWorker}, Peer: o.peer, Timeout: o.timeout, Stderr: stderr,
	}
	if o.peer == bench.ImplGloo {
		if !peerScript("allreduce", o.script, stderr) {
			return exitFailure
		}
		cfg.PeerCommand = []string{o.python, o.script}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep := newBenchReport("allreduce", o.json, stdout, stderr)
	machine, start := rep.begin(args, cfg.MachineSettings())
	emit := func(m bench.AllReduceMeasurement) {
		rep.measurement(m, m.Pair, m.WarmupPair, "%-5s %d ranks %7s  %9.3f ms  algbw %6.3f GB/s  busbw %6.3f GB/s",
			m.Impl, m.NProc, bench.FormatSize(m.Bytes), m.MedianS*1e3, m.AlgBW, m.BusBW)
	}
	ms, err := bench.RunAllReduce(ctx, cfg, emit)
	if err != nil {
		return rep.failRun(ctx, err)
	}
	return rep.finish(bench.AllReduceResults{Machine: machine, Start: start, Config: cfg, Measurements: ms,
		Summaries: bench.SummarizeAllReduce(ms, o.peer)}, o.out)
}

// runBenchWorker is one rank of flock bench allreduce:
// bench.RunAllReduceWorker with the flags its parent gives.
func runBenchWorker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flock bench "+benchWorker, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizesFlag := fs.String("sizes", "", "comma-separated sizes in bytes")
	warmup := fs.Int("warmup", 2, "untimed all-reduces per size")
	iters := fs.Int("iters", 5, "timed all-reduces per size")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	sizes, err := parseList(*sizesFlag, "size", func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
	if err != nil {
		fmt.Fprintf(stderr, "flock bench %s: %v\n", benchWorker, err)
		return exitUsage
	}
	return runWorker(benchWorker, stderr, func(ctx context.Context) error {
		return bench.RunAllReduceWorker(ctx, sizes, *warmup, *iters, stdout)
	})
}

// runWorker runs the rank of a worker subcommand under a context that
// Ctrl-C cancels, and returns its exit status, writing its error.
func runWorker(name string, stderr io.Writer, rank func(ctx context.Context) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := rank(ctx); err != nil {
		fmt.Fprintf(stderr, "flock bench %s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}
