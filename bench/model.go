package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
)

// ModelStepConfig describes one measurement of a model's training step on
// square images.
type ModelStepConfig struct {
	Model    string // a name registered in package nn/models
	Batch    int
	Image    int // side of the square input images
	Channels int // input channels
	Classes  int
	Warmup   int // untimed steps first
	Steps    int // timed steps
	Seed     uint64
	// Profile times every kernel call of the timed steps by kind
	// (backend.Profiler over the default device), into
	// ModelStepResult.Profile. Its bookkeeping adds to the step times.
	Profile bool
}

// ProfiledOp is one kind of kernel call of a profiled step: the backend
// method, its operation and, for matrix products and convolutions, the
// operands' shapes; calls and milliseconds per step.
type ProfiledOp struct {
	Op           string  `json:"op"`
	CallsPerStep float64 `json:"calls_per_step"`
	MsPerStep    float64 `json:"ms_per_step"`
}

// ModelStepResult is one measurement of a model's training step. Times are
// medians over the timed steps; FLOPs are counted (tensor.CountFLOPs), not
// assumed.
type ModelStepResult struct {
	Model    string `json:"model"`
	Batch    int    `json:"batch"`
	Image    int    `json:"image"`
	Channels int    `json:"channels"`
	Classes  int    `json:"classes"`
	Warmup   int    `json:"warmup"`
	Steps    int    `json:"steps"`
	Params   int    `json:"params"`
	Threads  int    `json:"threads"`

	ForwardMs   float64 `json:"forward_ms"`
	BackwardMs  float64 `json:"backward_ms"`
	OptimizerMs float64 `json:"optimizer_ms"`
	// StepMs is the median of whole steps (not the sum of the phases'
	// medians); ImagesPerSec is Batch / StepMs.
	StepMs       float64 `json:"step_ms"`
	ImagesPerSec float64 `json:"img_per_s"`

	// ForwardFLOPs and StepFLOPs are per image: the forward pass, and
	// forward plus backward.
	ForwardFLOPs float64 `json:"forward_flops"`
	StepFLOPs    float64 `json:"step_flops"`
	// GFLOPS is the rate of the median step: StepFLOPs·Batch / StepMs.
	GFLOPS float64 `json:"gflops"`

	// PeakRSS is the process's largest resident set so far, in bytes
	// (getrusage's ru_maxrss): building the model, its optimiser state and
	// the steps.
	PeakRSS   int64   `json:"peak_rss_bytes"`
	LossFirst float64 `json:"loss_first"`
	LossLast  float64 `json:"loss_last"`

	// Profile is the kernel time of the timed steps by kind of call, the
	// longest first (with ModelStepConfig.Profile).
	Profile []ProfiledOp `json:"profile,omitempty"`
}

// MeasureModelStep builds cfg.Model for cfg's input and runs one counting
// step, cfg.Warmup untimed and cfg.Steps timed training steps on a fixed
// batch (see TrainStep).
func MeasureModelStep(cfg ModelStepConfig) (ModelStepResult, error) {
	if cfg.Warmup < 0 || cfg.Steps <= 0 {
		return ModelStepResult{}, fmt.Errorf("bench: model step %s: %d warm-up and %d timed steps, want ≥ 0 and > 0", cfg.Model, cfg.Warmup, cfg.Steps)
	}
	var prof *backend.Profiler
	if cfg.Profile {
		dev := tensor.DefaultDevice()
		prof = backend.NewProfiler(dev)
		// A GPU's calls return before their kernels end.
		prof.Sync = dev.Name() != "cpu"
		tensor.SetDefaultDevice(prof)
		defer tensor.SetDefaultDevice(dev)
	}
	mc := models.Config{InChannels: cfg.Channels, Height: cfg.Image, Width: cfg.Image, NumClasses: cfg.Classes}
	s, err := NewModelStep(cfg.Model, mc, cfg.Batch, cfg.Seed)
	if err != nil {
		return ModelStepResult{}, err
	}
	defer s.Release()
	res := ModelStepResult{
		Model: cfg.Model, Batch: cfg.Batch, Image: cfg.Image, Channels: cfg.Channels, Classes: cfg.Classes,
		Warmup: cfg.Warmup, Steps: cfg.Steps, Params: s.NumParameters(), Threads: runtime.GOMAXPROCS(0),
	}
	fwd, bwd := s.CountFLOPs()
	res.ForwardFLOPs = float64(fwd) / float64(cfg.Batch)
	res.StepFLOPs = float64(fwd+bwd) / float64(cfg.Batch)
	for i := 0; i < cfg.Warmup; i++ {
		res.LossLast, _ = s.RunTimed()
		if i == 0 {
			res.LossFirst = res.LossLast
		}
	}
	runtime.GC()
	if prof != nil {
		prof.Reset()
	}
	var f, b, o, total []float64
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for i := 0; i < cfg.Steps; i++ {
		var st StepTimes
		res.LossLast, st = s.RunTimed()
		if i == 0 && cfg.Warmup == 0 {
			res.LossFirst = res.LossLast
		}
		f, b, o = append(f, ms(st.Forward)), append(b, ms(st.Backward)), append(o, ms(st.Optimizer))
		total = append(total, ms(st.Total()))
	}
	res.ForwardMs, res.BackwardMs, res.OptimizerMs = Median(f), Median(b), Median(o)
	res.StepMs = Median(total)
	res.ImagesPerSec = float64(cfg.Batch) / (res.StepMs / 1000)
	res.GFLOPS = res.StepFLOPs * float64(cfg.Batch) / (res.StepMs / 1000) / 1e9
	res.PeakRSS = PeakRSS()
	if prof != nil {
		for _, t := range prof.Times() {
			res.Profile = append(res.Profile, ProfiledOp{Op: t.Op, CallsPerStep: float64(t.Calls) / float64(cfg.Steps),
				MsPerStep: float64(t.Time) / 1e6 / float64(cfg.Steps)})
		}
	}
	return res, nil
}

// WriteProfile writes r's profile as a table: each kind of kernel call
// with its calls and milliseconds per step and its share of the step, the
// longest first, up to top rows (0: all) and a line for the rest.
func WriteProfile(w io.Writer, r ModelStepResult, top int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, batch %d, %d² images: step %.2f ms (median of %d), kernels below\n\n", r.Model, r.Batch, r.Image, r.StepMs, r.Steps)
	fmt.Fprintf(&b, "| kernel call | calls/step | ms/step | share of the step |\n|---|---:|---:|---:|\n")
	var rest ProfiledOp
	n := 0
	for i, p := range r.Profile {
		if top > 0 && i >= top {
			rest.CallsPerStep += p.CallsPerStep
			rest.MsPerStep += p.MsPerStep
			n++
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.3f | %.1f%% |\n", p.Op, p.CallsPerStep, p.MsPerStep, 100*p.MsPerStep/r.StepMs)
	}
	if n > 0 {
		fmt.Fprintf(&b, "| %d other kinds | %.0f | %.3f | %.1f%% |\n", n, rest.CallsPerStep, rest.MsPerStep, 100*rest.MsPerStep/r.StepMs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PeakRSS returns the largest resident set size the process has had, in
// bytes, or 0 where the system does not report it.
func PeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Maxrss) * 1024 // kibibytes on Linux
}

// Flags returns c as the flags of a command that makes one measurement
// (flock bench model-worker, bench/peers/torch_model.py), Model and Seed
// left out: RunModelComparison gives the model.
func (c ModelStepConfig) Flags() []string {
	return []string{"--batch", strconv.Itoa(c.Batch), "--image", strconv.Itoa(c.Image), "--channels", strconv.Itoa(c.Channels),
		"--classes", strconv.Itoa(c.Classes), "--warmup", strconv.Itoa(c.Warmup), "--steps", strconv.Itoa(c.Steps)}
}

// ModelPeerCommand returns the command line of peer's measurement by
// script (bench/peers/torch_model.py): its interpreter (PeerPython, python
// for ImplTorch), the script, and for ImplTorch2Compile the flag that puts
// the model under torch.compile.
func ModelPeerCommand(peer, python, script string) ([]string, error) {
	python, err := PeerPython(peer, python)
	if err != nil {
		return nil, err
	}
	argv := []string{python, script}
	if peer == ImplTorch2Compile {
		argv = append(argv, "--compile")
	}
	return argv, nil
}

// ModelMeasurement is one run's measurement of a model's training step,
// as flock's worker (MeasureModelStep) or bench/peers/torch_model.py
// reports it, with the implementation and the round it belongs to.
type ModelMeasurement struct {
	Impl   string `json:"impl"`
	Round  int    `json:"round"`
	Warmup bool   `json:"warmup_round"` // round 0
	ModelStepResult
	// PeakFraction is GFLOPS over the machine's peak, when known.
	PeakFraction float64 `json:"peak_fraction,omitempty"`
	// Version is the peer's PyTorch version; CompileS the seconds
	// torch.compile took in its untimed first step, beyond a timed step.
	Version  string  `json:"version,omitempty"`
	CompileS float64 `json:"compile_s,omitempty"`
}

// ModelComparison configures RunModelComparison.
type ModelComparison struct {
	// Models are names registered in package nn/models, measured in this
	// order in every round.
	Models []string
	// Step is each run's measurement: its Batch, Image, Channels,
	// Classes, Warmup and Steps (Model and Seed are not used).
	Step ModelStepConfig
	// Pairs is the number of measured rounds, after one warm-up round;
	// each round runs flock and then every peer once per model.
	Pairs int
	// Flock is the command that makes one measurement in a fresh process,
	// so that its peak memory is the model's, and prints its
	// ModelStepResult as the last line of its output; "--model NAME" and
	// Step's Flags are appended.
	Flock []string
	// Peers are ImplTorch, ImplTorch2 or ImplTorch2Compile, in the order
	// they run; PeerCommands their command lines (ModelPeerCommand), to
	// which the same flags are appended.
	Peers        []string
	PeerCommands map[string][]string
	// Peak is the machine's float32 peak in GFLOP/s for the fraction of
	// peak (0: unknown, no fraction); PeakEstimate says where it comes
	// from (see MeasurePeak).
	Peak         float64
	PeakEstimate string
	// Timeout bounds each run; 0 means 30 minutes.
	Timeout time.Duration
	// Stderr receives the runs' standard error; nil discards it.
	Stderr io.Writer
}

// MachineSettings returns c's part of the machine record (MachineRecord):
// the peak and how it was had, the rounds, and the peers' commands.
func (c ModelComparison) MachineSettings() map[string]any {
	s := map[string]any{"peak_gflops": c.Peak, "peak_estimate": c.PeakEstimate, "pairs": c.Pairs}
	if len(c.Peers) > 0 {
		cmds := map[string]string{}
		for p, argv := range c.PeerCommands {
			cmds[p] = strings.Join(argv, " ")
		}
		s["peer_commands"] = cmds
	}
	return s
}

// RunModelComparison runs the measurements of cfg, each a process of its
// own with OPENBLAS_NUM_THREADS=1 and OPENBLAS_CORETYPE unset: for every
// round (round 0 the warm-up), every model, flock and then every peer. A
// peer's FLOPs, and so its GFLOP/s, are those flock counted for the same
// architecture. Each measurement is passed to emit (which may be nil) as
// it comes; all are returned.
func RunModelComparison(ctx context.Context, cfg ModelComparison, emit func(ModelMeasurement)) ([]ModelMeasurement, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	flags := cfg.Step.Flags()
	var all []ModelMeasurement
	for round := 0; round <= cfg.Pairs; round++ {
		for _, name := range cfg.Models {
			for _, impl := range append([]string{ImplFlock}, cfg.Peers...) {
				argv := cfg.Flock
				if impl != ImplFlock {
					argv = cfg.PeerCommands[impl]
				}
				argv = append(append(slices.Clone(argv), "--model", name), flags...)
				m, err := runModelStep(ctx, argv, timeout, cfg.Stderr)
				if err != nil {
					return all, fmt.Errorf("%s %s: %w", impl, name, err)
				}
				m.Impl, m.Round, m.Warmup = impl, round, round == 0
				if impl != ImplFlock {
					if f := lastFlock(all, name); f != nil {
						m.ForwardFLOPs, m.StepFLOPs = f.ForwardFLOPs, f.StepFLOPs
						m.GFLOPS = m.StepFLOPs * float64(m.Batch) / (m.StepMs / 1000) / 1e9
					}
				}
				if cfg.Peak > 0 {
					m.PeakFraction = m.GFLOPS / cfg.Peak
				}
				all = append(all, m)
				if emit != nil {
					emit(m)
				}
			}
		}
	}
	return all, nil
}

// lastFlock returns flock's latest measurement of the model name, or nil.
func lastFlock(ms []ModelMeasurement, name string) *ModelMeasurement {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Impl == ImplFlock && ms[i].Model == name {
			return &ms[i]
		}
	}
	return nil
}

// runModelStep runs argv and reads the measurement on the last line of
// its output.
func runModelStep(ctx context.Context, argv []string, timeout time.Duration, stderr io.Writer) (ModelMeasurement, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	// OPENBLAS_CORETYPE unset lets OpenBLAS choose its kernels (AVX-512
	// where there is; see BENCHMARKS.md).
	cmd.Env = withoutEnv(append(os.Environ(), "OPENBLAS_NUM_THREADS=1"), "OPENBLAS_CORETYPE")
	if err := cmd.Run(); err != nil {
		return ModelMeasurement{}, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	var m ModelMeasurement
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		return ModelMeasurement{}, fmt.Errorf("%s: reading its record: %w", strings.Join(argv, " "), err)
	}
	return m, nil
}

// withoutEnv removes the variable key from env, in place.
func withoutEnv(env []string, key string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// ModelSummary gives, for one model, flock's medians (min–max) over the
// measured rounds and, for each peer, its own and the round-by-round
// ratio flock/peer of images/s. It is its own JSON record, of kind
// "summary".
type ModelSummary struct {
	Record string             `json:"record"` // "summary"
	Model  string             `json:"model"`
	Flock  ModelStats         `json:"flock"`
	Peers  []ModelPeerSummary `json:"peers,omitempty"`
}

// ModelPeerSummary is one peer's part of a ModelSummary.
type ModelPeerSummary struct {
	Impl    string `json:"impl"`
	Version string `json:"version"`
	ModelStats
	Ratio Stats `json:"ratio_flock_img_per_s"`
	// CompileS is the median of the runs' compilation seconds
	// (torch2-compile), left out of their timed steps.
	CompileS float64 `json:"compile_s,omitempty"`
}

// ModelStats are one implementation's figures of a model over the
// measured rounds: images/s as median (min–max), the other times and
// rates as medians, and the largest peak resident memory.
type ModelStats struct {
	ImagesPerSec Stats   `json:"img_per_s"`
	ForwardMs    float64 `json:"forward_ms"`
	BackwardMs   float64 `json:"backward_ms"`
	OptimizerMs  float64 `json:"optimizer_ms"`
	StepMs       float64 `json:"step_ms"`
	GFLOPS       float64 `json:"gflops"`
	PeakFraction float64 `json:"peak_fraction"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	ForwardFLOPs float64 `json:"forward_flops"`
	StepFLOPs    float64 `json:"step_flops"`
	Params       int     `json:"params"`
}

// SummarizeModels summarises ms for each of the models, in their order,
// with the peers in theirs; the warm-up round is left out.
func SummarizeModels(ms []ModelMeasurement, models, peers []string) []ModelSummary {
	var out []ModelSummary
	for _, name := range models {
		s := ModelSummary{Record: "summary", Model: name, Flock: modelStatsOf(ms, name, ImplFlock)}
		byRound := map[int]float64{}
		for _, m := range ms {
			if m.Model == name && m.Impl == ImplFlock && !m.Warmup {
				byRound[m.Round] = m.ImagesPerSec
			}
		}
		for _, peer := range peers {
			p := ModelPeerSummary{Impl: peer, ModelStats: modelStatsOf(ms, name, peer)}
			var ratios, compile []float64
			for _, m := range ms {
				if m.Model != name || m.Impl != peer {
					continue
				}
				p.Version = m.Version
				if m.CompileS > 0 {
					compile = append(compile, m.CompileS)
				}
				if f, ok := byRound[m.Round]; ok {
					ratios = append(ratios, f/m.ImagesPerSec)
				}
			}
			p.Ratio = StatsOf(ratios)
			if len(compile) > 0 {
				p.CompileS = Median(compile)
			}
			s.Peers = append(s.Peers, p)
		}
		out = append(out, s)
	}
	return out
}

// modelStatsOf gathers impl's figures of the model name over the measured
// rounds.
func modelStatsOf(ms []ModelMeasurement, name, impl string) ModelStats {
	var ips, f, b, o, st, gf, pf []float64
	var s ModelStats
	for _, m := range ms {
		if m.Model != name || m.Impl != impl || m.Warmup {
			continue
		}
		ips, f, b, o = append(ips, m.ImagesPerSec), append(f, m.ForwardMs), append(b, m.BackwardMs), append(o, m.OptimizerMs)
		st, gf, pf = append(st, m.StepMs), append(gf, m.GFLOPS), append(pf, m.PeakFraction)
		s.PeakRSS = max(s.PeakRSS, m.PeakRSS)
		s.ForwardFLOPs, s.StepFLOPs, s.Params = m.ForwardFLOPs, m.StepFLOPs, m.Params
	}
	s.ImagesPerSec = StatsOf(ips)
	s.ForwardMs, s.BackwardMs, s.OptimizerMs, s.StepMs = Median(f), Median(b), Median(o), Median(st)
	s.GFLOPS, s.PeakFraction = Median(gf), Median(pf)
	return s
}

// WriteModelTable writes the summaries as a Markdown table, a row per
// model and implementation (with the ratio flock/peer of images/s when
// there are peers), then the peak (peak GFLOP/s, 0 for none, and how it
// was had) and the compilation times of torch.compile.
func WriteModelTable(w io.Writer, sums []ModelSummary, peers []string, peak float64, peakHow string) error {
	var b strings.Builder
	b.WriteString("| model | impl | params | img/s median (min–max) | fwd ms | bwd ms | opt ms | step ms | GFLOP/img (step) | GFLOP/s | of peak | peak RSS |")
	if len(peers) > 0 {
		b.WriteString(" flock/impl img/s |")
	}
	b.WriteString("\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	if len(peers) > 0 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	row := func(model, impl string, s ModelStats, ratio *Stats) {
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f (%.1f–%.1f) | %.1f | %.1f | %.1f | %.1f | %.3g | %.1f | %.1f%% | %.2f GiB |",
			model, impl, s.Params, s.ImagesPerSec.Median, s.ImagesPerSec.Min, s.ImagesPerSec.Max,
			s.ForwardMs, s.BackwardMs, s.OptimizerMs, s.StepMs, s.StepFLOPs/1e9, s.GFLOPS, 100*s.PeakFraction, float64(s.PeakRSS)/(1<<30))
		switch {
		case len(peers) == 0:
		case ratio != nil:
			fmt.Fprintf(&b, " %.2f (%.2f–%.2f) |", ratio.Median, ratio.Min, ratio.Max)
		default:
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	for _, s := range sums {
		row(s.Model, ImplFlock, s.Flock, nil)
		for _, p := range s.Peers {
			row(s.Model, p.Impl, p.ModelStats, &p.Ratio)
		}
	}
	if peak > 0 {
		fmt.Fprintf(&b, "\nPeak: %.0f GFLOP/s (%s).\n", peak, peakHow)
	}
	for _, s := range sums {
		for _, p := range s.Peers {
			if p.CompileS > 0 {
				fmt.Fprintf(&b, "\n%s %s: torch.compile took %.1f s (median over the runs), in an untimed step before the warm-up steps.\n", s.Model, p.Impl, p.CompileS)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ModelResults are the records of a run of RunModelComparison, as Write
// saves them.
type ModelResults struct {
	Machine      map[string]any // MachineRecord, with Config's settings
	Start        time.Time
	Config       ModelComparison
	Measurements []ModelMeasurement
	Summaries    []ModelSummary
}

// SummaryRecords returns the summaries, each its own JSON record.
func (r ModelResults) SummaryRecords() []any {
	return appendRecords(nil, r.Summaries)
}

// WriteTables writes the summaries' Markdown table, with the peak and the
// compilation times.
func (r ModelResults) WriteTables(w io.Writer) error {
	return WriteModelTable(w, r.Summaries, r.Config.Peers, r.Config.Peak, r.Config.PeakEstimate)
}

// Write writes the records (the machine record, the measurements, the
// summaries) to dir/model_<date>.jsonl and a report of the method, the
// table, and the setup to dir/model_<date>.md.
func (r ModelResults) Write(dir string) error {
	cfg := r.Config
	recs := append(appendRecords([]any{r.Machine}, r.Measurements), r.SummaryRecords()...)
	return writeResults(dir, "model", r.Start, recs, func(b *strings.Builder, jsonl string) error {
		reportHeader(b, "Training steps of models", r.Start, r.Machine["command"])
		if len(cfg.Peers) > 0 {
			fmt.Fprintf(b, "Each round runs flock and then each peer (%s) for each model; %v rounds after one warm-up round; figures are the median (min–max) over the rounds, and the ratios are flock/peer of images/s computed round by round.\n\n",
				strings.Join(cfg.Peers, ", "), r.Machine["pairs"])
		}
		if err := r.WriteTables(b); err != nil {
			return err
		}
		reportMachine(b, r.Machine)
		for _, p := range cfg.Peers {
			for _, m := range r.Measurements {
				if m.Impl == p {
					fmt.Fprintf(b, "- %s: PyTorch %s (`%s`).\n", p, m.Version, strings.Join(cfg.PeerCommands[p], " "))
					break
				}
			}
		}
		fmt.Fprintf(b, "- Records: `%s`.\n", jsonl)
		return nil
	})
}
