package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/ffcv/jpeg"
)

// Peer of the loader benchmark.
const ImplTorch = "torch"

// Decoders of the loader benchmark.
const (
	// DecoderRRC is the training pipeline: random-resized-crop to
	// Size×Size, horizontal flip, ImageNet normalisation, NCHW float32.
	DecoderRRC = "rrc"
	// DecoderCenter is the evaluation pipeline: centre crop (ratio
	// 224/256) resized to Size×Size, normalisation, NCHW float32.
	DecoderCenter = "center"
	// DecoderRaw decodes images stored raw (or uint8 arrays) at their
	// size, with a horizontal flip and normalisation, NCHW float32.
	DecoderRaw = "raw"
)

// LoaderConfig is one measurement of the loader.
type LoaderConfig struct {
	// File is the .beton file; its fields "image" and "label" are read.
	File string
	// Decoder is DecoderRRC, DecoderCenter or DecoderRaw.
	Decoder string
	// Size is the output side of DecoderRRC and DecoderCenter.
	Size      int
	BatchSize int
	Workers   int
	// Warmup batches are read before the Batches measured ones. Epochs
	// follow one another as needed (random order).
	Warmup, Batches int
	Seed            uint64
}

// LoaderResult is the record of one measurement, written as one JSON
// object per line by flock and by the PyTorch peer alike.
type LoaderResult struct {
	Record  string `json:"record"`
	Impl    string `json:"impl"`
	Version string `json:"version"`
	// Backend is flock's JPEG decoder (turbojpeg or go), the peer's
	// "PIL <version>".
	Backend   string `json:"backend"`
	Decoder   string `json:"decoder"`
	Workers   int    `json:"workers"`
	BatchSize int    `json:"batch_size"`
	Batches   int    `json:"batches"`
	Images    int    `json:"images"`
	// Seconds is the wall time of the measured batches.
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the processor time the process (and the peer's worker
	// processes) used meanwhile.
	CPUSeconds   float64 `json:"cpu_s"`
	ImagesPerSec float64 `json:"img_per_s"`
	// PerWorker is ImagesPerSec / Workers: images per second per core when
	// every worker has a core.
	PerWorker float64 `json:"img_per_s_per_worker"`
	// PerCPUSecond is Images / CPUSeconds.
	PerCPUSecond float64 `json:"img_per_cpu_s"`
	// FirstBatchS is the time from opening the file to the first batch.
	FirstBatchS float64 `json:"first_batch_s"`
	// P50S and P99S are percentiles of the time each measured batch took
	// to arrive.
	P50S float64 `json:"p50_s"`
	P99S float64 `json:"p99_s"`
	// AllocsPerBatch and BytesPerBatch are Go heap allocations per
	// measured batch (flock only).
	AllocsPerBatch float64 `json:"allocs_per_batch"`
	BytesPerBatch  float64 `json:"bytes_per_batch"`
	// PeakRSSMB is the process's peak resident set (VmHWM), in MB;
	// PeakRSSChildMB the largest of the peer's worker processes.
	PeakRSSMB      float64 `json:"peak_rss_mb"`
	PeakRSSChildMB float64 `json:"peak_rss_child_mb,omitempty"`
	// HeapMB is the Go heap in use at the end (flock only).
	HeapMB float64 `json:"heap_mb,omitempty"`
	Pair   int     `json:"pair"`
	// WarmupPair marks the first, unreported round.
	WarmupPair bool `json:"warmup_pair,omitempty"`
}

// LoaderPipelines returns the pipelines of decoder for the fields of r:
// "image" as described at DecoderRRC, DecoderCenter and DecoderRaw,
// "label" as int64, other fields not loaded.
func LoaderPipelines(r *beton.Reader, decoder string, size int) (map[string]ffcv.Pipeline, error) {
	fi, ok := r.FieldIndex("image")
	if !ok {
		return nil, errors.New("bench: loader: the file has no field \"image\"")
	}
	f := r.Fields()[fi]
	mean, std := ffcv.ImageNetMean, ffcv.ImageNetStd
	if f.Channels == 1 || f.Type == beton.NDArrayType && (len(f.Shape) == 2 || f.Shape[len(f.Shape)-1] == 1) {
		mean, std = []float64{0.2860 * 255}, []float64{0.3530 * 255}
	}
	tail := []ffcv.Op{ffcv.ToCHW{}, ffcv.Normalize{Mean: mean, Std: std}}
	var image ffcv.Pipeline
	switch decoder {
	case DecoderRRC:
		image = append(ffcv.Pipeline{ffcv.RandomResizedCrop{Width: size, Height: size}, ffcv.Flip{}}, tail...)
	case DecoderCenter:
		image = append(ffcv.Pipeline{ffcv.CenterCrop{Width: size, Height: size}}, tail...)
	case DecoderRaw:
		dec := ffcv.Op(ffcv.SimpleImageDecoder{})
		if f.Type == beton.NDArrayType {
			dec = ffcv.NDArrayDecoder{}
		}
		image = append(ffcv.Pipeline{dec, ffcv.Flip{}}, tail...)
	default:
		return nil, fmt.Errorf("bench: loader: unknown decoder %q (want rrc, center or raw)", decoder)
	}
	p := map[string]ffcv.Pipeline{}
	for _, f := range r.Fields() {
		p[f.Name] = nil
	}
	p["image"] = image
	if _, ok := r.FieldIndex("label"); ok {
		p["label"] = ffcv.Pipeline{ffcv.IntDecoder{}, ffcv.Squeeze{}}
	}
	return p, nil
}

// MeasureLoader runs one measurement of flock's loader in this process.
// Its memory figures are the process's: measure one configuration per
// process for a meaningful peak RSS.
func MeasureLoader(ctx context.Context, cfg LoaderConfig) (LoaderResult, error) {
	if cfg.BatchSize <= 0 || cfg.Workers <= 0 || cfg.Batches <= 0 || cfg.Warmup < 0 {
		return LoaderResult{}, fmt.Errorf("bench: loader: batch size %d, workers %d, batches %d, warm-up %d: want positive (warm-up ≥ 0)", cfg.BatchSize, cfg.Workers, cfg.Batches, cfg.Warmup)
	}
	start := time.Now()
	r, err := beton.Open(cfg.File, beton.ReadOptions{})
	if err != nil {
		return LoaderResult{}, err
	}
	defer r.Close()
	pipes, err := LoaderPipelines(r, cfg.Decoder, cfg.Size)
	if err != nil {
		return LoaderResult{}, err
	}
	l, err := ffcv.NewLoader(r, ffcv.Options{BatchSize: cfg.BatchSize, Workers: cfg.Workers, Order: ffcv.Random, Seed: cfg.Seed, Pipelines: pipes})
	if err != nil {
		return LoaderResult{}, err
	}
	defer l.Close()
	if l.BatchesPerEpoch() == 0 {
		return LoaderResult{}, fmt.Errorf("bench: loader: %s has %d samples, fewer than a batch of %d", cfg.File, l.Len(), cfg.BatchSize)
	}
	next := func() (int, error) {
		b, err := l.Next(ctx)
		if err == io.EOF {
			b, err = l.Next(ctx)
		}
		if err != nil {
			return 0, err
		}
		n := b.Len()
		b.Release()
		return n, nil
	}
	if _, err := next(); err != nil {
		return LoaderResult{}, err
	}
	res := LoaderResult{
		Record: "run", Impl: ImplFlock, Version: runtime.Version(), Backend: jpegBackend(),
		Decoder: cfg.Decoder, Workers: cfg.Workers, BatchSize: cfg.BatchSize, Batches: cfg.Batches,
		FirstBatchS: time.Since(start).Seconds(),
	}
	for range cfg.Warmup {
		if _, err := next(); err != nil {
			return res, err
		}
	}
	lat := make([]float64, cfg.Batches)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuSeconds()
	t0 := time.Now()
	prev := t0
	for i := range cfg.Batches {
		n, err := next()
		if err != nil {
			return res, err
		}
		now := time.Now()
		lat[i] = now.Sub(prev).Seconds()
		prev = now
		res.Images += n
	}
	res.Seconds = time.Since(t0).Seconds()
	res.CPUSeconds = cpuSeconds() - cpu0
	runtime.ReadMemStats(&m1)
	res.AllocsPerBatch = float64(m1.Mallocs-m0.Mallocs) / float64(cfg.Batches)
	res.BytesPerBatch = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(cfg.Batches)
	res.HeapMB = float64(m1.HeapInuse) / 1e6
	res.PeakRSSMB = peakRSSMB()
	res.fill(lat)
	return res, nil
}

// fill computes the rates and percentiles from the measured figures.
func (res *LoaderResult) fill(lat []float64) {
	res.ImagesPerSec = float64(res.Images) / res.Seconds
	res.PerWorker = res.ImagesPerSec / float64(res.Workers)
	if res.CPUSeconds > 0 {
		res.PerCPUSecond = float64(res.Images) / res.CPUSeconds
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	res.P50S = percentile(s, 0.5)
	res.P99S = percentile(s, 0.99)
}

// percentile returns the p-quantile of sorted s (linear interpolation).
func percentile(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	x := p * float64(len(s)-1)
	i := int(x)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (x-float64(i))*(s[i+1]-s[i])
}

func jpegBackend() string {
	d := jpeg.NewDecoder()
	defer d.Close()
	return d.Backend()
}

// cpuSeconds returns the user and system time of this process.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// peakRSSMB returns the process's peak resident set size in MB: VmHWM
// from /proc/self/status, or getrusage's maximum where there is no /proc.
func peakRSSMB() float64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				if err == nil {
					return kb * 1024 / 1e6
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) * 1024 / 1e6
}

// LoaderComparison configures RunLoaderComparison.
type LoaderComparison struct {
	// Workers lists the worker counts to measure.
	Workers []int
	// Pairs is the number of measured rounds, after one warm-up round;
	// each round runs flock and then the peer once per worker count.
	Pairs int
	// Flock is the command that makes one flock measurement and prints its
	// LoaderResult as a JSON line; "--workers N" is appended.
	Flock []string
	// Peer is "", ImplTorch or ImplFFCV; PeerCommand its command, to which
	// "--workers N" is appended.
	Peer        string
	PeerCommand []string
	// PeerEnv is added to the peer's environment.
	PeerEnv []string
	Timeout time.Duration
	// Stderr receives the processes' standard error, line by line.
	Stderr io.Writer
}

// RunLoaderComparison runs the measurements, one process each, flock and
// peer alternating, and calls emit with each result as it comes.
func RunLoaderComparison(ctx context.Context, cfg LoaderComparison, emit func(LoaderResult)) ([]LoaderResult, error) {
	if len(cfg.Flock) == 0 {
		return nil, errors.New("bench: loader: no flock command")
	}
	if cfg.Peer != "" && (cfg.Peer != ImplTorch && cfg.Peer != ImplFFCV || len(cfg.PeerCommand) == 0) {
		return nil, fmt.Errorf("bench: loader: peer %q with command %q: want torch or ffcv and its command", cfg.Peer, cfg.PeerCommand)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	var all []LoaderResult
	for pair := 0; pair <= cfg.Pairs; pair++ {
		for _, w := range cfg.Workers {
			impls := [][]string{cfg.Flock}
			names := []string{ImplFlock}
			if cfg.Peer != "" {
				impls, names = append(impls, cfg.PeerCommand), append(names, cfg.Peer)
			}
			for k, argv := range impls {
				argv = append(slices.Clone(argv), "--workers", strconv.Itoa(w))
				var env []string
				if k > 0 {
					env = cfg.PeerEnv
				}
				res, err := runOne(ctx, timeout, names[k], argv, env, cfg.Stderr)
				if err != nil {
					return all, err
				}
				if res.Impl != names[k] || res.Workers != w {
					return all, fmt.Errorf("bench: loader: %s reported impl %q with %d workers, want %d", names[k], res.Impl, res.Workers, w)
				}
				res.Pair, res.WarmupPair = pair, pair == 0
				all = append(all, res)
				if emit != nil {
					emit(res)
				}
			}
		}
	}
	return all, nil
}

func runOne(ctx context.Context, timeout time.Duration, name string, argv, env []string, stderr io.Writer) (LoaderResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	tail := &tailWriter{prefix: "[" + name + "] ", w: stderr, mu: &sync.Mutex{}}
	cmd.Stdout, cmd.Stderr = &out, tail
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	tail.flush()
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return LoaderResult{}, fmt.Errorf("bench: loader: %s: timed out after %v", name, timeout)
		}
		return LoaderResult{}, fmt.Errorf("bench: loader: %s: %v%s", name, err, tail.last())
	}
	var res LoaderResult
	found := false
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		if err := json.Unmarshal(line, &res); err != nil {
			return res, fmt.Errorf("bench: loader: %s wrote %q: %v", name, line, err)
		}
		found = true
	}
	if !found {
		return res, fmt.Errorf("bench: loader: %s wrote no result", name)
	}
	return res, nil
}

// LoaderSummary gathers, for one worker count, the measured rounds of
// flock and the peer (warm-up round left out): medians and ranges of
// images/s per worker, their round-by-round ratio flock/peer, and the
// medians of the other figures.
type LoaderSummary struct {
	Workers     int
	Flock, Peer LoaderFigures
	Ratio       Stats // of PerWorker, round by round
	CPURatio    Stats // of PerCPUSecond, round by round
}

// LoaderFigures are one implementation's figures over the rounds.
type LoaderFigures struct {
	Backend                                           string
	PerWorker, PerCPUSecond                           Stats
	FirstBatchS, P50S, P99S                           float64
	AllocsPerBatch, PeakRSSMB, PeakRSSChildMB, HeapMB float64
}

// SummarizeLoader summarises results by worker count, in the order they
// first appear.
func SummarizeLoader(results []LoaderResult, peer string) []LoaderSummary {
	var order []int
	by := map[int][]LoaderResult{}
	for _, r := range results {
		if r.WarmupPair {
			continue
		}
		if by[r.Workers] == nil {
			order = append(order, r.Workers)
		}
		by[r.Workers] = append(by[r.Workers], r)
	}
	var out []LoaderSummary
	for _, w := range order {
		s := LoaderSummary{Workers: w}
		flock, other := map[int]LoaderResult{}, map[int]LoaderResult{}
		var fr, pr []LoaderResult
		for _, r := range by[w] {
			switch r.Impl {
			case ImplFlock:
				flock[r.Pair] = r
				fr = append(fr, r)
			case peer:
				other[r.Pair] = r
				pr = append(pr, r)
			}
		}
		s.Flock, s.Peer = figures(fr), figures(pr)
		var ratio, cpu []float64
		for pair, f := range flock {
			if p, ok := other[pair]; ok && p.PerWorker > 0 {
				ratio = append(ratio, f.PerWorker/p.PerWorker)
				if p.PerCPUSecond > 0 {
					cpu = append(cpu, f.PerCPUSecond/p.PerCPUSecond)
				}
			}
		}
		s.Ratio, s.CPURatio = StatsOf(ratio), StatsOf(cpu)
		out = append(out, s)
	}
	return out
}

func figures(rs []LoaderResult) LoaderFigures {
	var f LoaderFigures
	if len(rs) == 0 {
		return f
	}
	col := func(get func(LoaderResult) float64) []float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, get(r))
		}
		return xs
	}
	f.Backend = rs[0].Backend
	f.PerWorker = StatsOf(col(func(r LoaderResult) float64 { return r.PerWorker }))
	f.PerCPUSecond = StatsOf(col(func(r LoaderResult) float64 { return r.PerCPUSecond }))
	f.FirstBatchS = Median(col(func(r LoaderResult) float64 { return r.FirstBatchS }))
	f.P50S = Median(col(func(r LoaderResult) float64 { return r.P50S }))
	f.P99S = Median(col(func(r LoaderResult) float64 { return r.P99S }))
	f.AllocsPerBatch = Median(col(func(r LoaderResult) float64 { return r.AllocsPerBatch }))
	f.PeakRSSMB = Median(col(func(r LoaderResult) float64 { return r.PeakRSSMB }))
	f.PeakRSSChildMB = Median(col(func(r LoaderResult) float64 { return r.PeakRSSChildMB }))
	f.HeapMB = Median(col(func(r LoaderResult) float64 { return r.HeapMB }))
	return f
}

// WriteLoaderTable writes summaries as two Markdown tables: throughput
// (images/s per worker and per CPU-second, median (min–max), and the
// flock/peer ratios) and latency and memory (medians).
func WriteLoaderTable(w io.Writer, sums []LoaderSummary, peer string) error {
	var b strings.Builder
	span := func(s Stats, prec int) string {
		if s.N == 0 {
			return "–"
		}
		return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
	}
	if peer == "" {
		b.WriteString("| workers | flock img/s per worker | flock img/CPU-s | rounds |\n|---|---|---|---|\n")
	} else {
		fmt.Fprintf(&b, "| workers | flock img/s per worker | %[1]s img/s per worker | flock/%[1]s | flock img/CPU-s | %[1]s img/CPU-s | flock/%[1]s per CPU-s | rounds |\n|---|---|---|---|---|---|---|---|\n", peer)
	}
	for _, s := range sums {
		if peer == "" {
			fmt.Fprintf(&b, "| %d | %s | %s | %d |\n", s.Workers, span(s.Flock.PerWorker, 0), span(s.Flock.PerCPUSecond, 0), s.Flock.PerWorker.N)
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %d |\n", s.Workers,
			span(s.Flock.PerWorker, 0), span(s.Peer.PerWorker, 0), span(s.Ratio, 2),
			span(s.Flock.PerCPUSecond, 0), span(s.Peer.PerCPUSecond, 0), span(s.CPURatio, 2), s.Ratio.N)
	}
	b.WriteString("\n| workers | impl | backend | first batch | p50 batch | p99 batch | allocs/batch | peak RSS | Go heap |\n|---|---|---|---|---|---|---|---|---|\n")
	ms := func(x float64) string { return fmt.Sprintf("%.1f ms", 1e3*x) }
	for _, s := range sums {
		rows := []struct {
			name string
			f    LoaderFigures
		}{{ImplFlock, s.Flock}}
		if peer != "" {
			rows = append(rows, struct {
				name string
				f    LoaderFigures
			}{peer, s.Peer})
		}
		for _, r := range rows {
			if r.f.PerWorker.N == 0 {
				continue
			}
			allocs, heap, rss := "–", "–", fmt.Sprintf("%.0f MB", r.f.PeakRSSMB)
			if r.name == ImplFlock {
				allocs, heap = fmt.Sprintf("%.1f", r.f.AllocsPerBatch), fmt.Sprintf("%.0f MB", r.f.HeapMB)
			} else if r.f.PeakRSSChildMB > 0 {
				rss += fmt.Sprintf(" + %.0f MB per worker", r.f.PeakRSSChildMB)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Workers, r.name, r.f.Backend,
				ms(r.f.FirstBatchS), ms(r.f.P50S), ms(r.f.P99S), allocs, rss, heap)
		}
	}
	if len(sums) == 0 {
		b.WriteString("\n(no measured rounds: only the warm-up round ran)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteSyntheticBeton writes n synthetic photo-like images of side×side
// pixels (ffcv.SyntheticSource, stored as JPEG of quality 90) with their
// labels to the .beton file path, for measurements without a data set.
// progress, when not nil, receives the writer's progress bar.
func WriteSyntheticBeton(ctx context.Context, path string, n, side int, seed uint64, progress io.Writer) error {
	src := &ffcv.SyntheticSource{N: n, Width: side, Height: side, Seed: seed,
		Image: beton.RGBImageField{Mode: beton.WriteJPEG, JPEGQuality: 90}}
	return beton.Write(ctx, path, src.Fields(), src, beton.WriterOptions{Progress: progress})
}

// Flags returns c as the flags of a command that makes one measurement
// (flock bench loader --single, bench/peers/torch_loader.py,
// bench/peers/ffcv_loader.py), Workers left out: RunLoaderComparison
// appends it.
func (c LoaderConfig) Flags() []string {
	return []string{"--file", c.File, "--decoder", c.Decoder, "--size", strconv.Itoa(c.Size), "--batch-size", strconv.Itoa(c.BatchSize),
		"--batches", strconv.Itoa(c.Batches), "--warmup", strconv.Itoa(c.Warmup), "--seed", strconv.FormatUint(c.Seed, 10)}
}

// MachineSettings returns the part of the machine record (MachineRecord)
// of a comparison c of measurements run: the file and pipeline, the
// batches, the rounds, FLOCK_JPEG, and the peer with its command.
func (c LoaderComparison) MachineSettings(run LoaderConfig) map[string]any {
	s := map[string]any{
		"file": run.File, "decoder": run.Decoder, "size": run.Size, "batch_size": run.BatchSize, "batches": run.Batches,
		"warmup": run.Warmup, "pairs": c.Pairs, "jpeg_env": os.Getenv("FLOCK_JPEG"),
	}
	if c.Peer != "" {
		s["peer"], s["peer_command"] = c.Peer, strings.Join(c.PeerCommand, " ")
	}
	return s
}

// Record returns s as a JSON record of kind "summary", its figures keyed by
// implementation (flock and peer, "" for none). A figure without values (a
// peer whose runs measured no CPU time) is null.
func (s LoaderSummary) Record(peer string) map[string]any {
	rec := map[string]any{"record": "summary", "workers": s.Workers,
		"flock_img_per_s_per_worker": statsRecord(s.Flock.PerWorker), "flock_img_per_cpu_s": statsRecord(s.Flock.PerCPUSecond),
		"flock_allocs_per_batch": s.Flock.AllocsPerBatch, "flock_first_batch_s": s.Flock.FirstBatchS,
		"flock_p50_s": s.Flock.P50S, "flock_p99_s": s.Flock.P99S, "flock_peak_rss_mb": s.Flock.PeakRSSMB, "flock_heap_mb": s.Flock.HeapMB}
	if peer != "" {
		rec[peer+"_img_per_s_per_worker"] = statsRecord(s.Peer.PerWorker)
		rec[peer+"_img_per_cpu_s"] = statsRecord(s.Peer.PerCPUSecond)
		rec["ratio_flock_"+peer] = statsRecord(s.Ratio)
		rec["ratio_flock_"+peer+"_per_cpu_s"] = statsRecord(s.CPURatio)
	}
	return rec
}

// LoaderResults are the records of a run of RunLoaderComparison, as Write
// saves them.
type LoaderResults struct {
	Machine      map[string]any // MachineRecord, with Config's settings
	Start        time.Time
	Config       LoaderComparison
	Measurements []LoaderResult
	Summaries    []LoaderSummary
}

// SummaryRecords returns the summaries as JSON records (Record).
func (r LoaderResults) SummaryRecords() []any { return peerRecords(r.Summaries, r.Config.Peer) }

// WriteTables writes the summaries' Markdown tables.
func (r LoaderResults) WriteTables(w io.Writer) error {
	return WriteLoaderTable(w, r.Summaries, r.Config.Peer)
}

// Write writes the records (the machine record, the measurements, the
// summaries) to dir/loader_<date>.jsonl and a report of the method, the
// tables, and the setup to dir/loader_<date>.md.
func (r LoaderResults) Write(dir string) error {
	peer, machine := r.Config.Peer, r.Machine
	recs := append(appendRecords([]any{machine}, r.Measurements), r.SummaryRecords()...)
	return writeResults(dir, "loader", r.Start, recs, func(b *strings.Builder, jsonl string) error {
		reportHeader(b, "Data loader throughput", r.Start, machine["command"])
		fmt.Fprintf(b, "File %s, pipeline %s (output %v px), batches of %v, random order; each run is one process that reads %v warm-up batches and times %v. ",
			machine["file"], machine["decoder"], machine["size"], machine["batch_size"], machine["warmup"], machine["batches"])
		if peer != "" {
			how := "bench/peers/torch_loader.py: DataLoader with the same number of worker processes, PIL + torchvision"
			if peer == ImplFFCV {
				how = "bench/peers/ffcv_loader.py: FFCV's Loader with the same number of worker threads and the pipeline of FFCV's ImageNet example on the CPU"
			}
			fmt.Fprintf(b, "Each round runs flock and then %s (%s) for each worker count; %v rounds after one warm-up round; figures are the median (min–max) over the rounds, and the ratios are flock/%s computed round by round.\n\n", peer, how, machine["pairs"], peer)
		} else {
			fmt.Fprintf(b, "%v rounds after one warm-up round; figures are the median (min–max) over the rounds.\n\n", machine["pairs"])
		}
		if err := WriteLoaderTable(b, r.Summaries, peer); err != nil {
			return err
		}
		reportMachine(b, machine)
		for _, m := range r.Measurements {
			if m.Impl == peer {
				fmt.Fprintf(b, "- %s: %s, %s (`%s`).\n", peer, m.Version, m.Backend, machine["peer_command"])
				break
			}
		}
		fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
		return nil
	})
}
