package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/bench"
)

type gemmOptions struct {
	threads, sizes, peer, python, script, out string
	rounds                                    int
	minTime, timeout                          time.Duration
	json                                      bool
}

func gemmFlags(o *gemmOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock bench gemm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.threads, "threads", "1,2", "comma-separated thread `COUNTS`")
	fs.StringVar(&o.sizes, "sizes", "256,1024,2048,3136x576x64,784x1152x128", "comma-separated `SIZES`: N for N×N×N, or MxKxN for an M×K matrix times a K×N one")
	fs.StringVar(&o.peer, "peer", "", "also measure `PEER`, alternating with flock: numpy (numpy's matmul over OpenBLAS)")
	fs.IntVar(&o.rounds, "rounds", 5, "measured rounds, after one warm-up round; each round runs flock and then the peer for every thread count")
	fs.DurationVar(&o.minTime, "min-time", 200*time.Millisecond, "timed products per size in each run: at least 3, for at least this long (a run's figure is their median)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit of each peer run")
	fs.BoolVar(&o.json, "json", false, "write JSON Lines records to stdout instead of the table")
	fs.StringVar(&o.out, "out", "", "also write gemm_<date>.jsonl and gemm_<date>.md into `DIR` (e.g. bench/results)")
	fs.StringVar(&o.python, "python", bench.DefaultPython, "Python interpreter with numpy, for --peer numpy")
	fs.StringVar(&o.script, "peer-script", filepath.Join("bench", "peers", "numpy_gemm.py"), "the numpy peer's script")
	return fs
}

func benchGemmHelp(w io.Writer) {
	var o gemmOptions
	fs := gemmFlags(&o)
	fmt.Fprintf(w, `Usage: flock bench gemm [flags]

Measure the float32 matrix product C = A·B (row-major, A M×K, B K×N,
values in [-1, 1)) of flock's CPU backend (cpu.BLAS32, kernel path %q;
set %s to avx512, avx2 or go to force another) on the given numbers
of threads. Each run makes one untimed product and then times products
one by one; its figure is the median, given as GFLOP/s = 2·M·N·K / time,
and as a fraction of the peak that as many threads reach running
independent FMAs (measured at the start).

With --peer numpy every round also runs bench/peers/numpy_gemm.py, which
times numpy's matmul the same way, right after flock, with
OPENBLAS_NUM_THREADS set to the thread count and OPENBLAS_CORETYPE unset
(so that OpenBLAS picks its AVX-512 kernels); the table gives the median
and range of the round-by-round ratios flock/numpy. The first round is a
warm-up and is left out of the table.

Flags:
`, cpu.KernelPath(), cpu.KernelsEnv)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runBenchGemm(args []string, stdout, stderr io.Writer) int {
	var o gemmOptions
	fs := gemmFlags(&o)
	if code, done := parseBenchFlags("gemm", fs, args, benchGemmHelp, stdout, stderr); done {
		return code
	}
	threads, err := positiveInts(o.threads, "threads")
	if err != nil {
		return benchUsage(stderr, "gemm", "%v", err)
	}
	sizes, err := parseList(o.sizes, "size", bench.ParseGemmSize)
	if err != nil {
		return benchUsage(stderr, "gemm", "%v", err)
	}
	if o.rounds < 0 || o.minTime < 0 {
		return benchUsage(stderr, "gemm", "rounds %d, min-time %v: want both ≥ 0", o.rounds, o.minTime)
	}
	if o.peer != "" && o.peer != bench.ImplNumpy {
		return benchUsage(stderr, "gemm", "unknown peer %q (peers: numpy)", o.peer)
	}
	cfg := bench.GemmConfig{Sizes: sizes, Threads: threads, Rounds: o.rounds, MinTime: o.minTime,
		Peer: o.peer, Timeout: o.timeout, Stderr: stderr}
	if o.peer != "" {
		if !peerScript("gemm", o.script, stderr) {
			return exitFailure
		}
		cfg.PeerCommand = []string{o.python, o.script}
	}
	peaks := bench.MeasurePeaks(threads)
	cfg.Peak = func(t int) float64 { return peaks[t] }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep := newBenchReport("gemm", o.json, stdout, stderr)
	machine, start := rep.begin(args, cfg.MachineSettings(peaks))
	emit := func(m bench.GemmMeasurement) {
		rep.measurement(m, m.Round, m.Warmup, "%-5s %-16v %d threads  %10.3f ms  %7.1f GFLOP/s",
			m.Impl, m.Size(), m.Threads, m.MedianS*1e3, m.GFLOPS)
	}
	ms, err := bench.RunGemm(ctx, cfg, emit)
	if err != nil {
		return rep.failRun(ctx, err)
	}
	return rep.finish(bench.GemmResults{Machine: machine, Start: start, Config: cfg, Peaks: peaks, Measurements: ms,
		Summaries: bench.SummarizeGemm(ms, o.peer)}, o.out)
}
