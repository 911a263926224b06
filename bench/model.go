package bench

import (
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/flockml/flock/nn/models"
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
}

// MeasureModelStep builds cfg.Model for cfg's input and runs one counting
// step, cfg.Warmup untimed and cfg.Steps timed training steps on a fixed
// batch (see TrainStep).
func MeasureModelStep(cfg ModelStepConfig) (ModelStepResult, error) {
	if cfg.Warmup < 0 || cfg.Steps <= 0 {
		return ModelStepResult{}, fmt.Errorf("bench: model step %s: %d warm-up and %d timed steps, want ≥ 0 and > 0", cfg.Model, cfg.Warmup, cfg.Steps)
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
	return res, nil
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
