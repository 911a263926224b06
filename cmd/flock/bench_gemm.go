package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/bench"
)

func init() {
	benchmarks = append(benchmarks, benchmark{"gemm", "float32 matrix product GFLOP/s, optionally side by side with\n             numpy over OpenBLAS", runBenchGemm})
}

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
	peaks := measurePeaks(threads)
	cfg.Peak = func(t int) float64 { return peaks[t] }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now().UTC()
	peakList := map[string]float64{}
	for t, p := range peaks {
		peakList[strconv.Itoa(t)] = p
	}
	machine := machineRecord("gemm", args, start, map[string]any{
		"kernel": cpu.KernelPath(), "peak_gflops_by_threads": peakList, "rounds": o.rounds,
		"min_time_s": o.minTime.Seconds(),
	})
	if o.peer != "" {
		machine["peer"] = o.peer
		machine["peer_command"] = strings.Join(cfg.PeerCommand, " ")
	}
	rep := newBenchReport("gemm", o.json, stdout, stderr)
	rep.machine(machine)
	emit := func(m bench.GemmMeasurement) {
		rep.measurement(m, m.Round, m.Warmup, "%-5s %-16v %d threads  %10.3f ms  %7.1f GFLOP/s",
			m.Impl, m.Size(), m.Threads, m.MedianS*1e3, m.GFLOPS)
	}
	ms, err := bench.RunGemm(ctx, cfg, emit)
	if err != nil {
		return rep.failRun(ctx, err)
	}
	sums := bench.SummarizeGemm(ms, o.peer)
	err = summaries(rep, sums, func(s bench.GemmSummary) any { return gemmSummaryRecord(s, o.peer) }, func(w io.Writer) error {
		if err := bench.WriteGemmTable(w, sums, o.peer); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "\nPeak (independent FMAs, %s): %s\n", cpu.KernelPath(), formatPeaks(threads, peaks))
		return err
	})
	if err != nil {
		return rep.fail(err)
	}
	if o.out != "" {
		if err := writeGemmResults(o.out, machine, ms, sums, o.peer, threads, peaks, start); err != nil {
			return rep.fail(err)
		}
	}
	return exitOK
}

// measurePeaks measures the float32 peak of each thread count: the GFLOP/s
// of independent FMAs (cpu.MeasurePeak), absent under the pure-Go kernels.
func measurePeaks(threads []int) map[int]float64 {
	peaks := map[int]float64{}
	for _, t := range threads {
		if p, ok := cpu.MeasurePeak(t, 200*time.Millisecond); ok {
			peaks[t] = p
		}
	}
	return peaks
}

func formatPeaks(threads []int, peaks map[int]float64) string {
	var parts []string
	for _, t := range threads {
		if p, ok := peaks[t]; ok {
			parts = append(parts, fmt.Sprintf("%.0f GFLOP/s on %d threads", p, t))
		}
	}
	if len(parts) == 0 {
		return "not measured (pure-Go kernels)"
	}
	return strings.Join(parts, ", ")
}

func gemmSummaryRecord(s bench.GemmSummary, peer string) map[string]any {
	st := func(x bench.Stats) map[string]any {
		return map[string]any{"median": x.Median, "min": x.Min, "max": x.Max, "n": x.N}
	}
	rec := map[string]any{"record": "summary", "m": s.Size.M, "k": s.Size.K, "n": s.Size.N, "threads": s.Threads,
		"flock_gflops": st(s.Flock), "flock_peak_fraction": s.FlockPeak}
	if peer != "" {
		rec[peer+"_gflops"] = st(s.Peer)
		rec[peer+"_peak_fraction"] = s.PeerPeak
		rec["ratio_flock_"+peer] = st(s.Ratio)
	}
	return rec
}

func writeGemmResults(dir string, machine map[string]any, ms []bench.GemmMeasurement, sums []bench.GemmSummary, peer string, threads []int, peaks map[int]float64, start time.Time) error {
	recs := add(records{machine}, ms)
	for _, s := range sums {
		recs = append(recs, gemmSummaryRecord(s, peer))
	}
	return writeResults(dir, "gemm", start, recs, func(b *strings.Builder, jsonl string) error {
		reportHeader(b, "SGEMM GFLOP/s", start, machine["command"])
		fmt.Fprintf(b, "C = A·B in float32, row-major, A M×K and B K×N. A run makes one untimed product, then times products one by one for at least %v (at least 3); its figure is the median time, as GFLOP/s = 2·M·N·K / time. ", machine["min_time_s"])
		if peer != "" {
			fmt.Fprintf(b, "Each round runs flock and then %s (bench/peers/numpy_gemm.py) for every thread count; %v rounds after one warm-up round; figures are the median (min–max) over the rounds, and the ratio is flock/%s computed round by round. ", peer, machine["rounds"], peer)
		} else {
			fmt.Fprintf(b, "%v rounds after one warm-up round; figures are the median (min–max) over the rounds. ", machine["rounds"])
		}
		fmt.Fprintf(b, "\"Of peak\" divides by the GFLOP/s that as many threads reach running independent FMAs: %s.\n\n", formatPeaks(threads, peaks))
		if err := bench.WriteGemmTable(b, sums, peer); err != nil {
			return err
		}
		reportMachine(b, machine)
		fmt.Fprintf(b, "- flock: cpu.BLAS32, kernel path %s.\n", machine["kernel"])
		for _, m := range ms {
			if m.Impl == peer {
				fmt.Fprintf(b, "- %s: %s, core %s (`%s`, OPENBLAS_NUM_THREADS = threads, OPENBLAS_CORETYPE unset).\n", peer, m.Version, m.Kernel, machine["peer_command"])
				break
			}
		}
		fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
		return nil
	})
}
