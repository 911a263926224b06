package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// Implementations measured by RunAllReduce.
const (
	ImplFlock = "flock"
	ImplGloo  = "gloo"
)

// DefaultPython is the interpreter of the Gloo peer: Debian's, which has
// python3-torch.
const DefaultPython = "/usr/bin/python3"

// AllReduceSample is what rank 0 of one run reports for one size: the
// seconds of each timed all-reduce. Workers of both implementations write
// one such JSON object per line. Transport says how a flock worker's
// collectives moved the data ("shm" or "tcp"; empty when the Comm does
// not say).
type AllReduceSample struct {
	Impl      string    `json:"impl"`
	Version   string    `json:"version"`
	Transport string    `json:"transport,omitempty"`
	NProc     int       `json:"nproc"`
	Bytes     int64     `json:"bytes"`
	Seconds   []float64 `json:"seconds"`
}

// AllReduceMeasurement is one run's figure for one size: the median T of
// its timed all-reduces of S bytes over n ranks, the algorithm bandwidth
// S/T and the bus bandwidth 2(n−1)/n·S/T in GB/s (10⁹ bytes per second).
// Pair counts the alternating rounds; pair 0 is the warm-up round.
type AllReduceMeasurement struct {
	Record string `json:"record"`
	AllReduceSample
	Warmup     int       `json:"warmup"`
	MedianS    float64   `json:"median_s"`
	AlgBW      float64   `json:"algbw_gbps"`
	BusBW      float64   `json:"busbw_gbps"`
	Pair       int       `json:"pair"`
	WarmupPair bool      `json:"warmup_pair"`
	Time       time.Time `json:"time"`
}

// BusFactor is 2(n−1)/n, the fraction of the data each rank's link carries
// (each way) in a bandwidth-optimal all-reduce over n ranks; 0 for n = 1.
func BusFactor(n int) float64 {
	if n <= 1 {
		return 0
	}
	return 2 * float64(n-1) / float64(n)
}

func newMeasurement(s AllReduceSample, warmup, pair int) (AllReduceMeasurement, error) {
	if len(s.Seconds) == 0 {
		return AllReduceMeasurement{}, fmt.Errorf("bench: allreduce: %s, %d ranks, %d bytes: no timings", s.Impl, s.NProc, s.Bytes)
	}
	med := Median(s.Seconds)
	m := AllReduceMeasurement{Record: "allreduce", AllReduceSample: s, Warmup: warmup, MedianS: med,
		Pair: pair, WarmupPair: pair == 0, Time: time.Now().UTC().Truncate(time.Second)}
	if med > 0 {
		m.AlgBW = float64(s.Bytes) / med / 1e9
		m.BusBW = BusFactor(s.NProc) * m.AlgBW
	}
	return m, nil
}

// ParseSize parses a byte count such as "1MiB", "64KiB", "1GiB", "100MB"
// or "4096". Binary suffixes are powers of 1024, decimal ones (kB, MB, GB)
// powers of 1000.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	num, mul := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mul = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mul
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*float64(mul) > 1<<40 {
		return 0, fmt.Errorf("bench: size %q: want a byte count such as 1MiB, 64KiB or 4096", s)
	}
	b := v * float64(mul)
	if b != math.Trunc(b) {
		return 0, fmt.Errorf("bench: size %q is not a whole number of bytes", s)
	}
	return int64(b), nil
}

// FormatSize writes b with the largest binary unit that divides it.
func FormatSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	}
	return fmt.Sprintf("%dB", b)
}

// AllReduceWorker is one rank of a flock run: for each size S (bytes, a
// positive multiple of 4) it all-reduces (Sum) a float32 tensor of S/4
// elements, warmup times untimed, then iters times, each timed on its own
// after a Barrier. Every rank fills its tensor with rank+1 before each
// operation and checks after the last that every element is n(n+1)/2.
// Rank 0 writes one AllReduceSample per size to out as a JSON line. A
// final Barrier keeps every rank's Comm open until all ranks are done; its
// own failure is ignored, as a rank that has left it may close its Comm
// before the others have.
func AllReduceWorker(ctx context.Context, c dist.Comm, sizes []int64, warmup, iters int, out io.Writer) error {
	if iters < 1 {
		return fmt.Errorf("bench: allreduce worker: %d timed operations, want ≥ 1", iters)
	}
	rank, n := c.Rank(), c.Size()
	want := float32(n * (n + 1) / 2)
	enc := json.NewEncoder(out)
	for _, size := range sizes {
		if size <= 0 || size%4 != 0 {
			return fmt.Errorf("bench: allreduce worker: size %d bytes, want a positive multiple of 4", size)
		}
		t := tensor.Empty(tensor.Shape{int(size / 4)})
		run := func() error {
			t.Fill(float64(rank + 1))
			return c.AllReduce(ctx, t, dist.Sum)
		}
		for range warmup {
			if err := run(); err != nil {
				t.Release()
				return fmt.Errorf("bench: allreduce worker: %w", err)
			}
		}
		secs := make([]float64, 0, iters)
		for range iters {
			t.Fill(float64(rank + 1))
			if err := c.Barrier(ctx); err != nil {
				t.Release()
				return fmt.Errorf("bench: allreduce worker: %w", err)
			}
			t0 := time.Now()
			err := c.AllReduce(ctx, t, dist.Sum)
			secs = append(secs, time.Since(t0).Seconds())
			if err != nil {
				t.Release()
				return fmt.Errorf("bench: allreduce worker: %w", err)
			}
		}
		bad, got := -1, float32(0)
		for i, v := range t.Float32s() {
			if v != want {
				bad, got = i, v
				break
			}
		}
		t.Release()
		if bad >= 0 {
			return fmt.Errorf("bench: allreduce worker: rank %d: %s: element %d is %v, want %v", rank, FormatSize(size), bad, got, want)
		}
		if rank == 0 {
			s := AllReduceSample{Impl: ImplFlock, Version: runtime.Version(), NProc: n, Bytes: size, Seconds: secs}
			if tc, ok := c.(interface{ Transport() string }); ok {
				s.Transport = tc.Transport()
			}
			if err := enc.Encode(s); err != nil {
				return fmt.Errorf("bench: allreduce worker: %w", err)
			}
		}
	}
	_ = c.Barrier(ctx)
	return nil
}

// AllReduceConfig is a side-by-side all-reduce benchmark.
type AllReduceConfig struct {
	NProc []int   // world sizes
	Sizes []int64 // bytes per all-reduce, positive multiples of 4
	// Pairs is the number of measured rounds; each round runs flock and
	// then the peer once for every world size, and one unrecorded-in-the-
	// statistics warm-up round comes first.
	Pairs  int
	Warmup int // untimed all-reduces per size in each run
	Iters  int // timed all-reduces per size in each run
	// Flock is the command line of a flock worker (AllReduceWorker after
	// dist.Init from the environment); the harness appends --sizes,
	// --warmup and --iters.
	Flock []string
	// Peer is "" or ImplGloo; PeerCommand is the peer's command line
	// (default: DefaultPython and bench/peers/gloo_allreduce.py under the
	// working directory), to which the same flags are appended.
	Peer        string
	PeerCommand []string
	// Timeout bounds each run (all sizes on all ranks); 0 means 10 minutes.
	Timeout time.Duration
	// Stderr receives the ranks' standard error, each line prefixed with
	// the implementation and rank; nil discards it.
	Stderr io.Writer
}

// RunAllReduce runs the benchmark described by cfg. Each run starts the
// world size's processes on this machine with torchrun's variables set
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
// a free MASTER_PORT, and FLOCK_JOB_TOKEN, a fresh random secret) and
// yields one measurement per size, passed to emit as it comes (emit may be
// nil). All measurements are returned, warm-up round included.
func RunAllReduce(ctx context.Context, cfg AllReduceConfig, emit func(AllReduceMeasurement)) ([]AllReduceMeasurement, error) {
	if len(cfg.NProc) == 0 || len(cfg.Sizes) == 0 {
		return nil, errors.New("bench: allreduce: no world sizes or no message sizes")
	}
	for _, n := range cfg.NProc {
		if n < 1 {
			return nil, fmt.Errorf("bench: allreduce: %d processes, want ≥ 1", n)
		}
	}
	for _, s := range cfg.Sizes {
		if s <= 0 || s%4 != 0 {
			return nil, fmt.Errorf("bench: allreduce: size %d bytes, want a positive multiple of 4 (float32)", s)
		}
	}
	if cfg.Iters < 1 || cfg.Pairs < 0 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("bench: allreduce: iters %d, pairs %d, warmup %d: want iters ≥ 1, the others ≥ 0", cfg.Iters, cfg.Pairs, cfg.Warmup)
	}
	if len(cfg.Flock) == 0 {
		return nil, errors.New("bench: allreduce: no flock worker command")
	}
	type impl struct {
		name string
		argv []string
	}
	impls := []impl{{ImplFlock, cfg.Flock}}
	switch cfg.Peer {
	case "":
	case ImplGloo:
		argv := cfg.PeerCommand
		if len(argv) == 0 {
			argv = []string{DefaultPython, "bench/peers/gloo_allreduce.py"}
		}
		impls = append(impls, impl{ImplGloo, argv})
	default:
		return nil, fmt.Errorf("bench: allreduce: unknown peer %q (peers: %s)", cfg.Peer, ImplGloo)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	sizes := make([]string, len(cfg.Sizes))
	for i, s := range cfg.Sizes {
		sizes[i] = strconv.FormatInt(s, 10)
	}
	flags := []string{"--sizes", strings.Join(sizes, ","), "--warmup", strconv.Itoa(cfg.Warmup), "--iters", strconv.Itoa(cfg.Iters)}
	var all []AllReduceMeasurement
	for pair := 0; pair <= cfg.Pairs; pair++ {
		for _, n := range cfg.NProc {
			for _, im := range impls {
				argv := append(slices.Clone(im.argv), flags...)
				samples, err := launchRanks(ctx, timeout, im.name, argv, nil, n, cfg.Stderr)
				if err != nil {
					return all, err
				}
				for _, s := range samples {
					if s.Impl != im.name || s.NProc != n {
						return all, fmt.Errorf("bench: allreduce: %s worker reported impl %q with %d ranks, want %d", im.name, s.Impl, s.NProc, n)
					}
					m, err := newMeasurement(s, cfg.Warmup, pair)
					if err != nil {
						return all, err
					}
					all = append(all, m)
					if emit != nil {
						emit(m)
					}
				}
				if len(samples) != len(cfg.Sizes) {
					return all, fmt.Errorf("bench: allreduce: %s with %d ranks reported %d sizes, want %d", im.name, n, len(samples), len(cfg.Sizes))
				}
			}
		}
	}
	return all, nil
}

// launchRanks starts n processes of argv, with env added to their
// environment, and returns the samples rank 0 wrote. When one fails the
// others are killed.
func launchRanks(ctx context.Context, timeout time.Duration, name string, argv, env []string, n int, stderr io.Writer) ([]AllReduceSample, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("bench: allreduce: %w", err)
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("bench: allreduce: %w", err)
	}
	token := hex.EncodeToString(secret[:])
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		out0    bytes.Buffer
		mu      sync.Mutex
		failed  []int
		errs    = make([]error, n)
		tails   = make([]*tailWriter, n)
		wg      sync.WaitGroup
		started = make([]*exec.Cmd, 0, n)
	)
	for r := range n {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"FLOCK_JOB_TOKEN="+token)
		if name == ImplGloo {
			cmd.Env = append(cmd.Env, "GLOO_SOCKET_IFNAME=lo")
		}
		cmd.Env = append(cmd.Env, env...)
		cmd.WaitDelay = 5 * time.Second
		if r == 0 {
			cmd.Stdout = &out0
		}
		tails[r] = &tailWriter{prefix: fmt.Sprintf("[%s %d] ", name, r), w: stderr, mu: &mu}
		cmd.Stderr = tails[r]
		if err := cmd.Start(); err != nil {
			cancel()
			for _, c := range started {
				_ = c.Wait()
			}
			return nil, fmt.Errorf("bench: allreduce: start %s: %w", argv[0], err)
		}
		started = append(started, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				mu.Lock()
				errs[r] = err
				failed = append(failed, r)
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, t := range tails {
		t.flush()
	}
	if len(failed) > 0 {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("bench: allreduce: %s with %d ranks: timed out after %v", name, n, timeout)
		}
		var msgs []string
		for _, r := range failed {
			var ee *exec.ExitError
			if errors.As(errs[r], &ee) && !ee.Exited() && len(msgs) > 0 {
				continue
			}
			msgs = append(msgs, fmt.Sprintf("rank %d: %v%s", r, errs[r], tails[r].last()))
		}
		return nil, fmt.Errorf("bench: allreduce: %s with %d ranks: %s", name, n, strings.Join(msgs, "; "))
	}
	var samples []AllReduceSample
	sc := bufio.NewScanner(&out0)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var s AllReduceSample
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, fmt.Errorf("bench: allreduce: %s rank 0 wrote %q: %v", name, line, err)
		}
		samples = append(samples, s)
	}
	return samples, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailWriter forwards whole lines with a prefix and keeps the last few
// for error messages.
type tailWriter struct {
	prefix string
	w      io.Writer
	mu     *sync.Mutex
	buf    []byte
	lines  []string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		t.line(string(t.buf[:i]))
		t.buf = t.buf[i+1:]
	}
	return len(p), nil
}

func (t *tailWriter) line(s string) {
	t.lines = append(t.lines, s)
	if len(t.lines) > 5 {
		t.lines = t.lines[1:]
	}
	if t.w != nil {
		t.mu.Lock()
		fmt.Fprintf(t.w, "%s%s\n", t.prefix, s)
		t.mu.Unlock()
	}
}

func (t *tailWriter) flush() {
	if len(t.buf) > 0 {
		t.line(string(t.buf))
		t.buf = nil
	}
}

func (t *tailWriter) last() string {
	if len(t.lines) == 0 {
		return ""
	}
	return ": " + strings.Join(t.lines, "; ")
}

// AllReduceSummary gathers, for one world size and message size, the bus
// bandwidth of each implementation over the measured rounds (warm-up round
// left out) and the flock/peer ratio of bus bandwidths computed round by
// round (zero N when there is no peer).
type AllReduceSummary struct {
	NProc int
	Bytes int64
	Flock Stats
	Peer  Stats
	Ratio Stats
}

// SummarizeAllReduce summarises ms by world size and message size, in the
// order they first appear.
func SummarizeAllReduce(ms []AllReduceMeasurement, peer string) []AllReduceSummary {
	type key struct {
		n int
		b int64
	}
	var keys []key
	flock := map[key]map[int]float64{}
	other := map[key]map[int]float64{}
	for _, m := range ms {
		if m.WarmupPair {
			continue
		}
		k := key{m.NProc, m.Bytes}
		if flock[k] == nil {
			keys = append(keys, k)
			flock[k], other[k] = map[int]float64{}, map[int]float64{}
		}
		switch m.Impl {
		case ImplFlock:
			flock[k][m.Pair] = m.BusBW
		case peer:
			other[k][m.Pair] = m.BusBW
		}
	}
	var out []AllReduceSummary
	for _, k := range keys {
		var f, p, r []float64
		for _, pair := range sortedKeys(flock[k]) {
			f = append(f, flock[k][pair])
			if v, ok := other[k][pair]; ok && v > 0 {
				r = append(r, flock[k][pair]/v)
			}
		}
		for _, pair := range sortedKeys(other[k]) {
			p = append(p, other[k][pair])
		}
		s := AllReduceSummary{NProc: k.n, Bytes: k.b, Flock: StatsOf(f), Peer: StatsOf(p), Ratio: StatsOf(r)}
		out = append(out, s)
	}
	return out
}

func sortedKeys(m map[int]float64) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// WriteAllReduceTable writes summaries as a Markdown table of bus
// bandwidths: median (min–max) in GB/s per implementation, and the median
// (min–max) of the round-by-round flock/peer ratios.
func WriteAllReduceTable(w io.Writer, sums []AllReduceSummary, peer string) error {
	var b strings.Builder
	if peer == "" {
		b.WriteString("| ranks | size | flock bus GB/s | rounds |\n|---|---|---|---|\n")
	} else {
		fmt.Fprintf(&b, "| ranks | size | flock bus GB/s | %s bus GB/s | flock/%s | rounds |\n|---|---|---|---|---|---|\n", peer, peer)
	}
	span := func(s Stats, prec int) string {
		if s.N == 0 {
			return "–"
		}
		return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
	}
	for _, s := range sums {
		if peer == "" {
			fmt.Fprintf(&b, "| %d | %s | %s | %d |\n", s.NProc, FormatSize(s.Bytes), span(s.Flock, 3), s.Flock.N)
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %d |\n", s.NProc, FormatSize(s.Bytes),
			span(s.Flock, 3), span(s.Peer, 3), span(s.Ratio, 2), s.Ratio.N)
	}
	if len(sums) == 0 {
		b.WriteString("\n(no measured rounds: only the warm-up round ran)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RunAllReduceWorker is a rank of a job that RunAllReduce starts: it joins
// the job that the environment describes (dist.EnvFromOS: torchrun's
// variables) and runs AllReduceWorker.
func RunAllReduceWorker(ctx context.Context, sizes []int64, warmup, iters int, out io.Writer) error {
	return joinJob(ctx, func(c dist.Comm) error { return AllReduceWorker(ctx, c, sizes, warmup, iters, out) })
}

// joinJob joins the job that the environment describes and runs rank on
// its Comm, which it closes afterwards.
func joinJob(ctx context.Context, rank func(dist.Comm) error) error {
	env, err := dist.EnvFromOS()
	if err != nil {
		return err
	}
	c, err := dist.Init(ctx, env, dist.InitOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	return rank(c)
}

// MachineSettings returns c's part of the machine record (MachineRecord):
// the rounds, the all-reduces of each run, and the peer with its command.
func (c AllReduceConfig) MachineSettings() map[string]any {
	s := map[string]any{"pairs": c.Pairs, "warmup": c.Warmup, "iters": c.Iters}
	if c.Peer != "" {
		s["peer"] = c.Peer
		s["peer_command"] = strings.Join(c.PeerCommand, " ")
	}
	return s
}

// Record returns s as a JSON record of kind "summary", its figures keyed by
// implementation (flock and peer, "" for none).
func (s AllReduceSummary) Record(peer string) map[string]any {
	rec := map[string]any{"record": "summary", "nproc": s.NProc, "bytes": s.Bytes, "flock_busbw_gbps": statsMap(s.Flock)}
	if peer != "" {
		rec[peer+"_busbw_gbps"] = statsMap(s.Peer)
		rec["ratio_flock_"+peer] = statsMap(s.Ratio)
	}
	return rec
}

// AllReduceResults are the records of a run of RunAllReduce, as Write
// saves them.
type AllReduceResults struct {
	Machine      map[string]any // MachineRecord, with Config's settings
	Start        time.Time
	Config       AllReduceConfig
	Measurements []AllReduceMeasurement
	Summaries    []AllReduceSummary
}

// SummaryRecords returns the summaries as JSON records (Record).
func (r AllReduceResults) SummaryRecords() []any { return peerRecords(r.Summaries, r.Config.Peer) }

// WriteTables writes the summaries' Markdown table.
func (r AllReduceResults) WriteTables(w io.Writer) error {
	return WriteAllReduceTable(w, r.Summaries, r.Config.Peer)
}

// Write writes the records (the machine record, the measurements, the
// summaries) to dir/allreduce_<date>.jsonl and a report of the method, the
// table, and the setup to dir/allreduce_<date>.md.
func (r AllReduceResults) Write(dir string) error {
	peer, cfg := r.Config.Peer, r.Config
	recs := append(appendRecords([]any{r.Machine}, r.Measurements), r.SummaryRecords()...)
	return writeResults(dir, "allreduce", r.Start, recs, func(b *strings.Builder, jsonl string) error {
		reportHeader(b, "All-reduce bus bandwidth", r.Start, r.Machine["command"])
		fmt.Fprintf(b, "Sum of float32 tensors over processes of one machine on loopback. Each run starts the processes afresh; for each size they do %d untimed all-reduces, then %d timed ones, each after a barrier, and a run's figure is the median time T on rank 0. Bus bandwidth = 2(n−1)/n · S/T in GB/s (10⁹ B/s). ", cfg.Warmup, cfg.Iters)
		if peer != "" {
			fmt.Fprintf(b, "Each round runs flock and then %s (bench/peers/gloo_allreduce.py, torch.distributed gloo backend, `GLOO_SOCKET_IFNAME=lo`) for each world size; %d rounds after one warm-up round; figures are the median (min–max) over the rounds, and the ratio is flock/%s computed round by round.\n\n", peer, cfg.Pairs, peer)
		} else {
			fmt.Fprintf(b, "%d rounds after one warm-up round; figures are the median (min–max) over the rounds.\n\n", cfg.Pairs)
		}
		if err := WriteAllReduceTable(b, r.Summaries, peer); err != nil {
			return err
		}
		reportMachine(b, r.Machine)
		for _, m := range r.Measurements {
			if m.Impl == peer {
				fmt.Fprintf(b, "- %s: PyTorch %s (`%s`).\n", peer, m.Version, r.Machine["peer_command"])
				break
			}
		}
		fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
		return nil
	})
}
