package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// The optimiser of every training-step measurement: SGD with rate 0.01 and
// momentum 0.9, no weight decay, as in torch_train.py.
const (
	LearningRate = 0.01
	Momentum     = 0.9
)

// TrainStep is a model, its optimiser and one fixed batch, ready to run
// training steps.
type TrainStep struct {
	model  nn.Layer
	params int
	opt    *optim.SGD
	loss   nn.CrossEntropyLoss
	x      *autograd.Var  // [batch, 1, 28, 28] float32, N(0, 1)
	labels *tensor.Tensor // [batch] int64 in [0, 10)
	batch  int
}

// NewTrainStep builds the model registered as name for Fashion-MNIST-shaped
// inputs and a fixed batch of batch images, all drawn from seed.
func NewTrainStep(name string, batch int, seed uint64) (*TrainStep, error) {
	return NewModelStep(name, models.FashionMNIST, batch, seed)
}

// NewModelStep builds the model registered as name for inputs and classes
// as cfg describes, with a fixed batch of batch N(0, 1) images and random
// labels, all drawn from seed.
func NewModelStep(name string, cfg models.Config, batch int, seed uint64) (*TrainStep, error) {
	if batch <= 0 {
		return nil, fmt.Errorf("bench: train step %s: batch size %d, want > 0", name, batch)
	}
	g := tensor.NewGenerator(seed)
	model, err := models.Build(name, cfg, g)
	if err != nil {
		return nil, fmt.Errorf("bench: train step: %w", err)
	}
	named := model.NamedParameters()
	params := make([]*autograd.Var, len(named))
	names := make([]string, len(named))
	for i, p := range named {
		params[i], names[i] = p.Param, p.Name
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = int64(r.IntN(cfg.NumClasses))
	}
	return &TrainStep{
		model:  model,
		params: nn.NumParameters(model),
		opt: optim.NewSGD([]*optim.Group{optim.NewGroup(params, names, LearningRate, 0)},
			optim.SGDOptions{Momentum: Momentum}),
		x:      autograd.Const(g.Randn(tensor.Shape{batch, cfg.InChannels, cfg.Height, cfg.Width})),
		labels: tensor.FromSlice(labels, tensor.Shape{batch}),
		batch:  batch,
	}, nil
}

// Run performs one training step and returns the batch's loss before the
// update.
func (s *TrainStep) Run() float64 {
	loss, _ := s.RunTimed()
	return loss
}

// StepTimes are the wall times of the phases of one training step.
type StepTimes struct {
	Forward   time.Duration // model and loss, recording the tape
	Backward  time.Duration // gradients of every parameter
	Optimizer time.Duration // the update and clearing the gradients
}

// Total is the time of the whole step.
func (t StepTimes) Total() time.Duration { return t.Forward + t.Backward + t.Optimizer }

// RunTimed performs one training step like Run and also returns the time
// of each of its phases.
func (s *TrainStep) RunTimed() (float64, StepTimes) {
	var st StepTimes
	t0 := time.Now()
	logits := s.model.Forward(s.x)
	loss := s.loss.Forward(logits, s.labels)
	l := loss.Value.Item()
	t1 := time.Now()
	loss.Backward()
	t2 := time.Now()
	s.opt.Step()
	s.opt.ZeroGrad()
	t3 := time.Now()
	loss.Release()
	logits.Release()
	st.Forward, st.Backward, st.Optimizer = t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)
	return l, st
}

// CountFLOPs returns the floating-point operations of the matrix products
// and convolutions of one forward pass and of one backward pass over the
// batch (2 per multiply-add; see tensor.CountFLOPs), counted while running
// one training step.
func (s *TrainStep) CountFLOPs() (forward, backward int64) {
	var logits, loss *autograd.Var
	forward = tensor.CountFLOPs(func() {
		logits = s.model.Forward(s.x)
		loss = s.loss.Forward(logits, s.labels)
	})
	backward = tensor.CountFLOPs(loss.Backward)
	s.opt.Step()
	s.opt.ZeroGrad()
	loss.Release()
	logits.Release()
	return forward, backward
}

// Batch is the number of images in each step.
func (s *TrainStep) Batch() int { return s.batch }

// NumParameters is the number of trainable parameters of the model.
func (s *TrainStep) NumParameters() int { return s.params }

// Release frees the model, the optimiser's state and the batch.
func (s *TrainStep) Release() {
	s.opt.Release()
	s.model.Release()
	s.x.Release()
	s.labels.Release()
}

// TrainStepConfig describes one training-step measurement.
type TrainStepConfig struct {
	Model  string // a name registered in package nn/models
	Batch  int
	Warmup int // untimed steps first
	Steps  int // timed steps
	Seed   uint64
}

// TrainStepResult is one training-step measurement.
type TrainStepResult struct {
	Model         string  `json:"model"`
	Batch         int     `json:"batch"`
	Warmup        int     `json:"warmup"`
	Steps         int     `json:"steps"`
	Params        int     `json:"params"`
	Seconds       float64 `json:"seconds"`     // wall time of the timed steps
	ImagesPerSec  float64 `json:"img_per_s"`   // Batch·Steps / Seconds
	MillisPerStep float64 `json:"ms_per_step"` // 1000·Seconds / Steps
	LossFirst     float64 `json:"loss_first"`  // loss of the first step
	LossLast      float64 `json:"loss_last"`   // loss of the last timed step
	Threads       int     `json:"threads"`     // GOMAXPROCS
}

// MeasureTrainStep runs cfg.Warmup untimed and then cfg.Steps timed
// training steps of cfg.Model on one fixed batch and returns the timed
// steps' throughput.
func MeasureTrainStep(cfg TrainStepConfig) (TrainStepResult, error) {
	if cfg.Warmup < 0 || cfg.Steps <= 0 {
		return TrainStepResult{}, fmt.Errorf("bench: train step %s: %d warm-up and %d timed steps, want ≥ 0 and > 0", cfg.Model, cfg.Warmup, cfg.Steps)
	}
	s, err := NewTrainStep(cfg.Model, cfg.Batch, cfg.Seed)
	if err != nil {
		return TrainStepResult{}, err
	}
	defer s.Release()
	res := TrainStepResult{
		Model: cfg.Model, Batch: cfg.Batch, Warmup: cfg.Warmup, Steps: cfg.Steps,
		Params: s.NumParameters(), Threads: runtime.GOMAXPROCS(0),
	}
	for i := 0; i < cfg.Warmup; i++ {
		res.LossLast = s.Run()
		if i == 0 {
			res.LossFirst = res.LossLast
		}
	}
	runtime.GC()
	start := time.Now()
	for i := 0; i < cfg.Steps; i++ {
		res.LossLast = s.Run()
		if i == 0 && cfg.Warmup == 0 {
			res.LossFirst = res.LossLast
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.ImagesPerSec = float64(cfg.Batch*cfg.Steps) / res.Seconds
	res.MillisPerStep = 1000 * res.Seconds / float64(cfg.Steps)
	return res, nil
}
