package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/flockml/flock/backend/cpu"
)

// ImplNumpy is the SGEMM peer: numpy's matmul over its BLAS (OpenBLAS on
// Debian), run by bench/peers/numpy_gemm.py.
const ImplNumpy = "numpy"

// GemmSize is the shape of one product C = A·B: A is M×K, B is K×N.
type GemmSize struct{ M, K, N int }

// ParseGemmSize reads "N" (a cube) or "MxKxN".
func ParseGemmSize(s string) (GemmSize, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), "x")
	if len(parts) == 1 {
		parts = []string{parts[0], parts[0], parts[0]}
	}
	if len(parts) != 3 {
		return GemmSize{}, fmt.Errorf("bench: gemm size %q: want N or MxKxN", s)
	}
	var d [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 {
			return GemmSize{}, fmt.Errorf("bench: gemm size %q: want positive integers N or MxKxN", s)
		}
		d[i] = v
	}
	return GemmSize{M: d[0], K: d[1], N: d[2]}, nil
}

func (s GemmSize) String() string { return fmt.Sprintf("%dx%dx%d", s.M, s.K, s.N) }

// FLOPs is the work of one product, 2·M·N·K.
func (s GemmSize) FLOPs() float64 { return 2 * float64(s.M) * float64(s.N) * float64(s.K) }

// GemmMeasurement is one run's figure for one size and thread count: the
// median time of its products and the GFLOP/s it gives. Round 0 is the
// warm-up round.
type GemmMeasurement struct {
	Record  string  `json:"record"`
	Impl    string  `json:"impl"`
	M       int     `json:"m"`
	K       int     `json:"k"`
	N       int     `json:"n"`
	Threads int     `json:"threads"`
	Calls   int     `json:"calls"`
	MedianS float64 `json:"median_s"`
	GFLOPS  float64 `json:"gflops"`
	// PeakFraction is GFLOPS over the measured peak of as many threads.
	PeakFraction float64 `json:"peak_fraction,omitempty"`
	Version      string  `json:"version"`
	// Kernel is flock's kernel path or the core OpenBLAS chose.
	Kernel string `json:"kernel"`
	Round  int    `json:"round"`
	Warmup bool   `json:"warmup_round"`
}

// Size returns the measurement's product shape.
func (m GemmMeasurement) Size() GemmSize { return GemmSize{m.M, m.K, m.N} }

// MeasureGemm times flock's float32 product (cpu.BLAS32 on threads
// goroutines) the way numpy_gemm.py times numpy's: one untimed product, then
// products one by one until minTime has passed and at least three were
// made; the figure is the median call time.
func MeasureGemm(size GemmSize, threads int, minTime time.Duration, seed uint64) GemmMeasurement {
	if runtime.GOMAXPROCS(0) < threads {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
	}
	r := rand.New(rand.NewPCG(seed, uint64(size.M*size.K+size.N)))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = 2*r.Float32() - 1
		}
		return s
	}
	a, b, c := fill(size.M*size.K), fill(size.K*size.N), make([]float32, size.M*size.N)
	impl := cpu.BLAS32{Threads: threads}
	product := func() {
		impl.Sgemm(blas.NoTrans, blas.NoTrans, size.M, size.N, size.K, 1, a, size.K, b, size.N, 0, c, size.N)
	}
	product()
	var times []float64
	start := time.Now()
	for len(times) < 3 || time.Since(start) < minTime {
		t0 := time.Now()
		product()
		times = append(times, time.Since(t0).Seconds())
	}
	med := Median(times)
	return GemmMeasurement{
		Record: "gemm", Impl: ImplFlock, M: size.M, K: size.K, N: size.N, Threads: threads,
		Calls: len(times), MedianS: med, GFLOPS: size.FLOPs() / med / 1e9,
		Version: runtime.Version(), Kernel: cpu.KernelPath(),
	}
}

// GemmConfig describes a side-by-side SGEMM benchmark.
type GemmConfig struct {
	Sizes   []GemmSize
	Threads []int
	// Rounds is the number of measured rounds; each runs flock and then
	// the peer for every thread count, after one warm-up round.
	Rounds  int
	MinTime time.Duration // timed products per size in each run
	// Peer is "" or ImplNumpy; PeerCommand is its command line (default
	// DefaultPython bench/peers/numpy_gemm.py), to which --sizes and
	// --min-time are appended. It runs with OPENBLAS_NUM_THREADS (and
	// OMP_NUM_THREADS) set to the thread count and OPENBLAS_CORETYPE unset.
	Peer        string
	PeerCommand []string
	// Peak, if set, gives the peak GFLOP/s of a thread count for the
	// measurements' PeakFraction.
	Peak    func(threads int) float64
	Timeout time.Duration // bounds each peer run; 0 means 10 minutes
	Stderr  io.Writer     // receives the peer's standard error; nil discards it
}

// RunGemm runs the benchmark described by cfg, passing each measurement to
// emit (if not nil) as it comes, and returns them all, warm-up round
// included.
func RunGemm(ctx context.Context, cfg GemmConfig, emit func(GemmMeasurement)) ([]GemmMeasurement, error) {
	if len(cfg.Sizes) == 0 || len(cfg.Threads) == 0 {
		return nil, errors.New("bench: gemm: no sizes or no thread counts")
	}
	for _, t := range cfg.Threads {
		if t < 1 {
			return nil, fmt.Errorf("bench: gemm: %d threads, want ≥ 1", t)
		}
	}
	if cfg.Rounds < 0 {
		return nil, fmt.Errorf("bench: gemm: %d rounds, want ≥ 0", cfg.Rounds)
	}
	argv := cfg.PeerCommand
	switch cfg.Peer {
	case "":
	case ImplNumpy:
		if len(argv) == 0 {
			argv = []string{DefaultPython, "bench/peers/numpy_gemm.py"}
		}
	default:
		return nil, fmt.Errorf("bench: gemm: unknown peer %q (peers: %s)", cfg.Peer, ImplNumpy)
	}
	sizes := make([]string, len(cfg.Sizes))
	for i, s := range cfg.Sizes {
		sizes[i] = s.String()
	}
	argv = append(slices.Clone(argv), "--sizes", strings.Join(sizes, ","), "--min-time", strconv.FormatFloat(cfg.MinTime.Seconds(), 'g', -1, 64))
	var all []GemmMeasurement
	add := func(m GemmMeasurement, round, threads int) {
		m.Round, m.Warmup = round, round == 0
		if cfg.Peak != nil {
			if p := cfg.Peak(threads); p > 0 {
				m.PeakFraction = m.GFLOPS / p
			}
		}
		all = append(all, m)
		if emit != nil {
			emit(m)
		}
	}
	for round := 0; round <= cfg.Rounds; round++ {
		for _, t := range cfg.Threads {
			for i, s := range cfg.Sizes {
				if err := ctx.Err(); err != nil {
					return all, err
				}
				add(MeasureGemm(s, t, cfg.MinTime, uint64(round*len(cfg.Sizes)+i)), round, t)
			}
			if cfg.Peer == "" {
				continue
			}
			ms, err := runGemmPeer(ctx, cfg, argv, t)
			if err != nil {
				return all, err
			}
			if len(ms) != len(cfg.Sizes) {
				return all, fmt.Errorf("bench: gemm: %s with %d threads reported %d sizes, want %d", cfg.Peer, t, len(ms), len(cfg.Sizes))
			}
			for i, m := range ms {
				if m.Size() != cfg.Sizes[i] || m.Impl != cfg.Peer {
					return all, fmt.Errorf("bench: gemm: %s reported %s %v, want %s %v", cfg.Peer, m.Impl, m.Size(), cfg.Peer, cfg.Sizes[i])
				}
				m.Threads = t
				add(m, round, t)
			}
		}
	}
	return all, nil
}

// runGemmPeer runs the peer once for every size with threads BLAS threads.
func runGemmPeer(ctx context.Context, cfg GemmConfig, argv []string, threads int) ([]GemmMeasurement, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS":
			continue
		}
		env = append(env, kv)
	}
	n := strconv.Itoa(threads)
	cmd.Env = append(env, "OPENBLAS_NUM_THREADS="+n, "OMP_NUM_THREADS="+n)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = cfg.Stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("bench: gemm: %s: %w", strings.Join(argv, " "), err)
	}
	var ms []GemmMeasurement
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m GemmMeasurement
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("bench: gemm: %s output %q: %w", cfg.Peer, line, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// GemmSummary gives, for one size and thread count, flock's and the peer's
// GFLOP/s and the ratio flock/peer computed round by round, over the
// measured rounds (the warm-up round left out).
type GemmSummary struct {
	Size        GemmSize
	Threads     int
	Flock, Peer Stats // GFLOP/s
	Ratio       Stats
	// FlockPeak and PeerPeak are the medians of the peak fractions (0
	// when no peak was known).
	FlockPeak, PeerPeak float64
}

// SummarizeGemm groups measurements by size and thread count, in the order
// they first appear.
func SummarizeGemm(ms []GemmMeasurement, peer string) []GemmSummary {
	type key struct {
		size    GemmSize
		threads int
	}
	type group struct {
		flock, peer         map[int]float64 // by round
		flockPeak, peerPeak []float64
	}
	var order []key
	groups := map[key]*group{}
	for _, m := range ms {
		if m.Warmup {
			continue
		}
		k := key{m.Size(), m.Threads}
		g := groups[k]
		if g == nil {
			g = &group{flock: map[int]float64{}, peer: map[int]float64{}}
			groups[k] = g
			order = append(order, k)
		}
		switch m.Impl {
		case ImplFlock:
			g.flock[m.Round] = m.GFLOPS
			g.flockPeak = append(g.flockPeak, m.PeakFraction)
		case peer:
			g.peer[m.Round] = m.GFLOPS
			g.peerPeak = append(g.peerPeak, m.PeakFraction)
		}
	}
	values := func(m map[int]float64) []float64 {
		var v []float64
		for _, r := range sortedKeys(m) {
			v = append(v, m[r])
		}
		return v
	}
	var sums []GemmSummary
	for _, k := range order {
		g := groups[k]
		s := GemmSummary{Size: k.size, Threads: k.threads, Flock: StatsOf(values(g.flock)), Peer: StatsOf(values(g.peer))}
		var ratios []float64
		for _, r := range sortedKeys(g.flock) {
			if p, ok := g.peer[r]; ok && p > 0 {
				ratios = append(ratios, g.flock[r]/p)
			}
		}
		s.Ratio = StatsOf(ratios)
		if len(g.flockPeak) > 0 {
			s.FlockPeak = Median(g.flockPeak)
		}
		if len(g.peerPeak) > 0 {
			s.PeerPeak = Median(g.peerPeak)
		}
		sums = append(sums, s)
	}
	return sums
}

// WriteGemmTable writes the summaries as a Markdown table.
func WriteGemmTable(w io.Writer, sums []GemmSummary, peer string) error {
	var b strings.Builder
	fig := func(s Stats) string {
		if s.N == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f (%.1f–%.1f)", s.Median, s.Min, s.Max)
	}
	pct := func(f float64) string {
		if f == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", 100*f)
	}
	if peer == "" {
		b.WriteString("| M×K×N | threads | flock GFLOP/s | of peak |\n|---|---|---|---|\n")
	} else {
		fmt.Fprintf(&b, "| M×K×N | threads | flock GFLOP/s | of peak | %s GFLOP/s | of peak | flock/%s |\n|---|---|---|---|---|---|---|\n", peer, peer)
	}
	for _, s := range sums {
		fmt.Fprintf(&b, "| %v | %d | %s | %s |", s.Size, s.Threads, fig(s.Flock), pct(s.FlockPeak))
		if peer != "" {
			ratio := "–"
			if s.Ratio.N > 0 {
				ratio = fmt.Sprintf("%.2f (%.2f–%.2f)", s.Ratio.Median, s.Ratio.Min, s.Ratio.Max)
			}
			fmt.Fprintf(&b, " %s | %s | %s |", fig(s.Peer), pct(s.PeerPeak), ratio)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MeasurePeaks measures the float32 peak of each thread count, in GFLOP/s:
// independent FMAs for 200 ms (cpu.MeasurePeak). Under the pure-Go kernels
// there is none, and the map is empty.
func MeasurePeaks(threads []int) map[int]float64 {
	peaks := map[int]float64{}
	for _, t := range threads {
		if p, ok := cpu.MeasurePeak(t, 200*time.Millisecond); ok {
			peaks[t] = p
		}
	}
	return peaks
}

// FormatPeaks describes peaks in the order of threads, as "N GFLOP/s on T
// threads", or says that they were not measured.
func FormatPeaks(threads []int, peaks map[int]float64) string {
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

// MachineSettings returns c's part of the machine record (MachineRecord):
// the kernel path, the peaks by thread count, the rounds and minimum time,
// and the peer with its command.
func (c GemmConfig) MachineSettings(peaks map[int]float64) map[string]any {
	byThreads := map[string]float64{}
	for t, p := range peaks {
		byThreads[strconv.Itoa(t)] = p
	}
	s := map[string]any{
		"kernel": cpu.KernelPath(), "peak_gflops_by_threads": byThreads, "rounds": c.Rounds,
		"min_time_s": c.MinTime.Seconds(),
	}
	if c.Peer != "" {
		s["peer"] = c.Peer
		s["peer_command"] = strings.Join(c.PeerCommand, " ")
	}
	return s
}

// Record returns s as a JSON record of kind "summary", its figures keyed by
// implementation (flock and peer, "" for none).
func (s GemmSummary) Record(peer string) map[string]any {
	rec := map[string]any{"record": "summary", "m": s.Size.M, "k": s.Size.K, "n": s.Size.N, "threads": s.Threads,
		"flock_gflops": statsMap(s.Flock), "flock_peak_fraction": s.FlockPeak}
	if peer != "" {
		rec[peer+"_gflops"] = statsMap(s.Peer)
		rec[peer+"_peak_fraction"] = s.PeerPeak
		rec["ratio_flock_"+peer] = statsMap(s.Ratio)
	}
	return rec
}

// GemmResults are the records of a run of RunGemm, as Write saves them.
type GemmResults struct {
	Machine      map[string]any // MachineRecord, with Config's settings
	Start        time.Time
	Config       GemmConfig
	Peaks        map[int]float64 // by thread count, as MeasurePeaks gives them
	Measurements []GemmMeasurement
	Summaries    []GemmSummary
}

// SummaryRecords returns the summaries as JSON records (Record).
func (r GemmResults) SummaryRecords() []any { return peerRecords(r.Summaries, r.Config.Peer) }

// WriteTables writes the summaries' Markdown table and then the peaks
// against which the fractions are read.
func (r GemmResults) WriteTables(w io.Writer) error {
	if err := WriteGemmTable(w, r.Summaries, r.Config.Peer); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nPeak (independent FMAs, %s): %s\n", cpu.KernelPath(), FormatPeaks(r.Config.Threads, r.Peaks))
	return err
}

// Write writes the records (the machine record, the measurements, the
// summaries) to dir/gemm_<date>.jsonl and a report of the method, the
// table, and the setup to dir/gemm_<date>.md.
func (r GemmResults) Write(dir string) error {
	peer := r.Config.Peer
	recs := append(appendRecords([]any{r.Machine}, r.Measurements), r.SummaryRecords()...)
	return writeResults(dir, "gemm", r.Start, recs, func(b *strings.Builder, jsonl string) error {
		reportHeader(b, "SGEMM GFLOP/s", r.Start, r.Machine["command"])
		fmt.Fprintf(b, "C = A·B in float32, row-major, A M×K and B K×N. A run makes one untimed product, then times products one by one for at least %v (at least 3); its figure is the median time, as GFLOP/s = 2·M·N·K / time. ", r.Machine["min_time_s"])
		if peer != "" {
			fmt.Fprintf(b, "Each round runs flock and then %s (bench/peers/numpy_gemm.py) for every thread count; %v rounds after one warm-up round; figures are the median (min–max) over the rounds, and the ratio is flock/%s computed round by round. ", peer, r.Machine["rounds"], peer)
		} else {
			fmt.Fprintf(b, "%v rounds after one warm-up round; figures are the median (min–max) over the rounds. ", r.Machine["rounds"])
		}
		fmt.Fprintf(b, "\"Of peak\" divides by the GFLOP/s that as many threads reach running independent FMAs: %s.\n\n", FormatPeaks(r.Config.Threads, r.Peaks))
		if err := WriteGemmTable(b, r.Summaries, peer); err != nil {
			return err
		}
		reportMachine(b, r.Machine)
		fmt.Fprintf(b, "- flock: cpu.BLAS32, kernel path %s.\n", r.Machine["kernel"])
		for _, m := range r.Measurements {
			if m.Impl == peer {
				fmt.Fprintf(b, "- %s: %s, core %s (`%s`, OPENBLAS_NUM_THREADS = threads, OPENBLAS_CORETYPE unset).\n", peer, m.Version, m.Kernel, r.Machine["peer_command"])
				break
			}
		}
		fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
		return nil
	})
}

// MeasurePeak measures the float32 peak of GOMAXPROCS threads as
// MeasurePeaks does, and says how, for reports; under the pure-Go kernels
// it returns 0 and says that it was not measured.
func MeasurePeak() (gflops float64, how string) {
	threads := runtime.GOMAXPROCS(0)
	peak := MeasurePeaks([]int{threads})[threads]
	if peak == 0 {
		return 0, "not measured (pure-Go kernels)"
	}
	return peak, fmt.Sprintf("measured by independent FMAs on %d threads, %s", threads, cpu.KernelPath())
}
