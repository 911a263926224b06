package train

import (
	"encoding/json"
	"errors"
	"fmt"

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
	// Close ends the strategy's part in the run: it waits for what it
	// issued, frees its buffers and parts from its peers. The Comm it was
	// built over stays open, its owner's. Close may be called more than
	// once.
	Close()
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

	// emit and replay are the Trainer's; see Emit and TrainBatches.
	emit   func(Record)
	replay func(n int, fn func(x *tensor.Tensor)) error
	// interrupted and stop: see Interrupted and Stop.
	interrupted, stop bool
}

// Interrupted reports whether this worker's run has been asked to stop
// (its context ended) while its strategy coordinates stopping.
func (s *StepContext) Interrupted() bool { return s.interrupted }

// Stop asks the Trainer to stop after the current step, writing its
// checkpoint, as an interrupted run does. A StopCoordinator calls it on
// every worker at the same step.
func (s *StepContext) Stop() { s.stop = true }

// StopCoordinator is implemented by strategies whose workers must stop at
// the same step (their checkpoints form a set). When a worker's context
// ends, the Trainer does not stop at once: it reports the interrupt
// through StepContext.Interrupted and goes on until the strategy, having
// agreed with the other workers (at its next synchronization), calls
// StepContext.Stop on all of them; each then writes its part of the
// checkpoint set and returns the interruption error.
type StopCoordinator interface {
	CoordinatesStop()
}

// WorkerCheckpoints is implemented by strategies whose workers' models and
// optimizer state differ between synchronizations (Local SGD, DiLoCo,
// DmSGD): a checkpoint of their run is a set, a file per worker and a
// manifest (Options.CheckpointComm), and its workers stop together
// (StopCoordinator) so that the set is whole.
type WorkerCheckpoints interface {
	CheckpointsPerWorker()
}

// IndependentWorkers is implemented by strategies whose workers run apart
// (Swarm SGD): no collective brings them together, so each stops on its
// own when the run's context ends, Close parts from its partners before
// the world's Comm closes, and the run ends without a barrier. Their runs
// have no checkpoints (StrategyKind.NoCheckpoints): the workers stop at
// different steps.
type IndependentWorkers interface {
	WorkersApart()
}

// Emit sends r to the run's log (Options.OnRecord), as the Trainer's own
// records go; strategies report synchronizations this way.
func (s *StepContext) Emit(r Record) {
	if s.emit != nil {
		s.emit(r)
	}
}

// TrainBatches calls fn with the inputs of up to n training batches of this
// worker — the first batches, in order, of the epoch of the last step taken
// — without recording gradients, and leaves the training position as it
// was. Strategies re-estimate normalisation statistics on them before an
// evaluation; the batches are a function of the step, so a resumed run
// draws the same ones.
func (s *StepContext) TrainBatches(n int, fn func(x *tensor.Tensor)) error {
	if s.replay == nil {
		return errors.New("train: TrainBatches outside a Trainer")
	}
	return s.replay(n, fn)
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

// Close implements Strategy.
func (SingleWorker) Close() {}

// StepPreparer is implemented by strategies that act before a step's
// forward pass: JointSpar switches off the gradients of the layers it does
// not sample (autograd.Var.SetRequiresGrad), so that backward skips their
// work. BeforeStep runs after the step's learning rate is set.
type StepPreparer interface {
	BeforeStep(s *StepContext) error
}

// EvalPreparer is implemented by strategies whose workers' models differ
// between synchronizations (Local SGD, DiLoCo). When an evaluation is due
// the Trainer calls BeforeEval on every rank — those that evaluate and, with
// Options.PeerEvaluates, those whose peer does — then evaluates, then calls
// the returned restore. BeforeEval leaves in the model what is to be
// evaluated (the workers' average, with re-estimated normalisation
// statistics); restore puts back the training state, so that evaluating
// never changes the run's trajectory.
type EvalPreparer interface {
	BeforeEval(s *StepContext) (restore func() error, err error)
}

// CommReporter is implemented by strategies that communicate: the Trainer
// puts their counts in its records and summary.
type CommReporter interface {
	CommStats() CommStats
}

// CommStats counts one worker's communication. Bytes are payload bytes
// under the ring algorithms (dist.Meter), so that strategies compare by
// what their algorithm needs whatever transport carries it.
type CommStats struct {
	// Sent and Received count the bytes of training (setup and evaluation
	// apart) this worker sent and received.
	Sent     int64 `json:"bytes_sent"`
	Received int64 `json:"bytes_received"`
	// Collectives is the number of collectives training issued.
	Collectives int64 `json:"collectives"`
	// Blocked is the time, in seconds, the training loop waited on
	// communication.
	Blocked float64 `json:"blocked_s"`
	// Syncs is the number of synchronizations (every step for data
	// parallel).
	Syncs int64 `json:"syncs"`
	// SetupBytes and EvalBytes are the bytes sent plus received to start
	// the run (broadcast of the initial model) and to prepare evaluations.
	SetupBytes int64 `json:"setup_bytes"`
	EvalBytes  int64 `json:"eval_bytes"`
	// DataParallelBytes is what data parallelism would have sent over the
	// same steps: a gradient all-reduce per step.
	DataParallelBytes int64 `json:"dp_bytes"`
	// Consensus is the consensus distance at the last synchronization,
	// mean over workers of ‖θ_k − θ̄‖ / ‖θ̄‖ (0 for data parallel), as a
	// ConsensusSample measures it.
	Consensus float64 `json:"consensus"`
	// PairDistance is, for strategies that average in pairs without a
	// global collective (Swarm SGD), the mean distance ‖θ_i − θ_j‖ / ‖θ_i‖
	// between the two models of this worker's interactions: the spread as
	// the pairs see it, which is not the consensus distance.
	PairDistance float64 `json:"pair_distance,omitempty"`
	// LayersPerStep is the mean number of layers whose gradients a step
	// computed and sent, and Compute the seconds spent in forward and
	// backward passes, for strategies that skip gradient work (JointSpar).
	LayersPerStep float64 `json:"layers_per_step,omitempty"`
	Compute       float64 `json:"compute_s,omitempty"`
	// InnerSent, InnerSyncs and InnerBlocked are the inner level's part
	// of a two-level run (Local SGD or DiLoCo averaging inside each node
	// more often than across nodes): the bytes it sent (within Sent), its
	// synchronizations (apart from Syncs, which counts those of the whole
	// world) and the seconds it blocked (within Blocked).
	InnerSent    int64   `json:"inner_bytes_sent,omitempty"`
	InnerSyncs   int64   `json:"inner_syncs,omitempty"`
	InnerBlocked float64 `json:"inner_blocked_s,omitempty"`
	// SyncSeconds and SyncWaited time the synchronizations that run
	// behind local steps (streaming Local SGD): the seconds from each
	// launch to the end of its all-reduce, summed, and the part of them
	// the training loop waited for at merges (within Blocked). The rest
	// was hidden behind compute.
	SyncSeconds float64 `json:"sync_s,omitempty"`
	SyncWaited  float64 `json:"sync_waited_s,omitempty"`
}

// Hidden returns the share of the in-flight time of streamed
// synchronizations that overlapped compute: 1 − SyncWaited/SyncSeconds
// (0 when none ran).
func (c CommStats) Hidden() float64 {
	if c.SyncSeconds <= 0 {
		return 0
	}
	return max(0, 1-c.SyncWaited/c.SyncSeconds)
}

// Saving returns how many times fewer bytes training sent than data
// parallelism would have: DataParallelBytes / Sent (0 before any
// communication).
func (c CommStats) Saving() float64 {
	if c.Sent == 0 {
		return 0
	}
	return float64(c.DataParallelBytes) / float64(c.Sent)
}

// PendingSync is a synchronization whose consensus distance waits to be
// averaged over the workers: strategies send each worker's Dist in the
// next synchronization's collective (or, at the end of the run, alone),
// so that measuring it costs no collective of its own, and emit the
// synchronization's record once the mean is known.
type PendingSync struct {
	// Step is the number of steps taken at the synchronization, Epoch its
	// 1-based epoch, H the length of the round it closed, LR the rate of
	// its last step.
	Step, Epoch, H int
	LR             float64
	// Dist is this worker's distance ‖θ_k − θ̄‖ / ‖θ̄‖.
	Dist float64
}

// Emit sends p's KindSync record, with the communication counts comm
// (whose Consensus holds the workers' mean distance).
func (p *PendingSync) Emit(s *StepContext, comm CommStats) {
	s.Emit(Record{Kind: KindSync, Step: p.Step, Epoch: p.Epoch, LR: p.LR, H: p.H, Comm: &comm})
}

// EncodePendingSync returns p as a checkpoint scalar ("" for nil).
func EncodePendingSync(p *PendingSync) string {
	if p == nil {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// DecodePendingSync parses what EncodePendingSync returned.
func DecodePendingSync(s string) (*PendingSync, error) {
	if s == "" {
		return nil, nil
	}
	p := new(PendingSync)
	if err := json.Unmarshal([]byte(s), p); err != nil {
		return nil, fmt.Errorf("pending synchronization %q: %w", s, err)
	}
	return p, nil
}
