package train

import (
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// Strategy decides how the workers of a run cooperate. The Trainer calls it
// at two points of every step,
//
//	forward → loss.Backward() → AfterBackward → optimizer step → AfterStep
//
// AfterBackward sees the gradients before the optimizer uses them (data
// parallelism finishes its all-reduce here; sparse strategies keep only the
// sampled layers). AfterStep sees the updated parameters (Local SGD
// averages every H steps, gossip mixes with neighbours, DiLoCo takes its
// outer step). A hook that returns an error stops the run with it.
//
// Setup runs once, after the model and optimizer exist and any checkpoint
// has been loaded, before the first step: the place to register
// autograd.Var.OnGradReady hooks on the parameters (bucketed all-reduce
// while backward is still running) or to broadcast the initial weights.
//
// A strategy with state of its own (a step counter, an outer optimizer)
// implements Stateful so that checkpoints carry it.
type Strategy interface {
	Setup(s *StepContext) error
	AfterBackward(s *StepContext) error
	AfterStep(s *StepContext) error
}

// Stateful is implemented by strategies whose state must survive a
// checkpoint. State returns tensors (new references, released by the
// caller) and strings; LoadState restores them, checking names and shapes.
type Stateful interface {
	State() (map[string]*tensor.Tensor, map[string]string)
	LoadState(tensors map[string]*tensor.Tensor, scalars map[string]string) error
}

// StepContext is what a Strategy sees of the run. The Trainer owns it and
// updates the step fields before each hook; a strategy may keep the pointer.
type StepContext struct {
	// Params are the model's parameters with their dotted names, in
	// state-dict order; their Grad holds the step's gradient between
	// backward and the optimizer step.
	Params []nn.NamedParameter
	// Model is the network being trained.
	Model nn.Layer
	// Optimizer updates Params.
	Optimizer optim.Optimizer
	// Schedule gives the learning rate of any step: QSR chooses its sync
	// period from LRAt(Step+1).
	Schedule optim.Schedule
	// Generator is the run's random stream, checkpointed with it.
	Generator *tensor.Generator

	// Step is the index of the current optimizer step, counting from 0
	// over the whole run (at Setup: the first step to be taken).
	Step int
	// Epoch and Batch locate the step's batch in the data (0-based).
	Epoch, Batch int
	// StepsPerEpoch and TotalSteps size the run.
	StepsPerEpoch, TotalSteps int
	// LR is the learning rate of the current step.
	LR float64
}

// LRAt returns the learning rate of step t of the run.
func (s *StepContext) LRAt(t int) float64 { return s.Schedule.LR(t) }

// SingleWorker is the Strategy of one worker alone: every hook does
// nothing, and the step is plain minibatch SGD (or AdamW, or LARS).
type SingleWorker struct{}

var _ Strategy = SingleWorker{}

// Setup implements Strategy.
func (SingleWorker) Setup(*StepContext) error { return nil }

// AfterBackward implements Strategy.
func (SingleWorker) AfterBackward(*StepContext) error { return nil }

// AfterStep implements Strategy.
func (SingleWorker) AfterStep(*StepContext) error { return nil }
