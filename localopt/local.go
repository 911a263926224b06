package localopt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flockml/flock/optim"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// Options configure Local and DiLoCo.
type Options struct {
	// Schedule chooses each round's H (required).
	Schedule SyncSchedule
	// AverageState names optimizer state fields averaged with the
	// parameters at every synchronization ("momentum_buffer", "exp_avg",
	// "exp_avg_sq"). By default each worker keeps its own. Local only.
	AverageState []string
	// BNBatches is the number of training micro-batches on which batch
	// norm's running statistics are re-estimated (cumulative average,
	// PyTorch's momentum=None) before each evaluation; 0 keeps each
	// worker's running statistics. Either way they are then averaged
	// across the workers.
	BNBatches int
	// Context bounds every collective; nil means context.Background, so
	// that each is bounded by dist.DefaultTimeout.
	Context context.Context
	// Optimizer names the inner optimizer ("SGD", "AdamW", "LARS") in
	// String before Setup, which learns it from the optimizer itself
	// (empty: SGD).
	Optimizer string
	// Quantization sends each synchronization's values in 8 or 4 bits
	// (train.QuantizedMean): Local's change since the last
	// synchronization, DiLoCo's pseudo-gradient. The zero value sends
	// float32s in one all-reduce.
	Quantization train.Quantization
	// NodeSize groups the workers into nodes of NodeSize consecutive ranks
	// for a two-level run: inside each node the parameters (and averaged
	// state) are averaged every InnerH steps of a round, across all
	// workers when the round ends, as Schedule says (PyTorch's
	// HierarchicalModelAverager, with QSR at the outer level). 0: one
	// level.
	NodeSize, InnerH int
	// Fragments cuts the synchronizations into that many fragments,
	// synchronized at staggered steps of each round, and Overlap lets
	// each run behind that many local steps (see stream.go): streaming
	// synchronization. Neither: the whole model at the round's end.
	Fragments, Overlap int
}

// Local is Local SGD — Local AdamW, Local LARS with those inner optimizers
// — under a synchronization schedule (Stich, 2019; Lin et al., 2020; Gu et
// al., 2023). Round s starts at step t_s from the common parameters θ̄ with
// H_s = Schedule's choice from η_{t_s}; each worker takes H_s steps of its
// own optimizer on its own data, keeping its own optimizer state, and then
//
//	θ̄ ← (1/K) Σ_k θ_k
//
// over the parameters that require a gradient, in one flat all-reduce
// (with Options.AverageState, the named optimizer state rides in the same
// all-reduce). After it every worker holds bit-identical parameters.
// Buffers — batch norm's running statistics — stay local during training;
// BeforeEval averages the model, re-estimates and averages them for the
// evaluation and puts everything back afterwards.
//
// The order of operations is the reference code's: the optimizer takes
// step t, the learning rate of step t+1 is set, and if step t closed a
// round the schedule chooses the next H from η_{t+1}.
//
// K workers with H = 1 and momentum-free SGD take the steps of data
// parallel SGD (up to rounding): averaging θ̄ − η g_k over k gives
// θ̄ − η ḡ. Local with H = 1 is not data parallel with AdamW or momentum,
// whose state stays per worker: String says which it is.
type Local struct {
	core
	fields []string
}

var (
	_ train.Strategy     = (*Local)(nil)
	_ train.Stateful     = (*Local)(nil)
	_ train.EvalPreparer = (*Local)(nil)
	_ train.CommReporter = (*Local)(nil)
)

// NewLocal returns Local SGD over c.
func NewLocal(c dist.Comm, opt Options) (*Local, error) {
	co, err := newCore(c, opt, "local")
	if err != nil {
		return nil, err
	}
	return &Local{core: co, fields: opt.AverageState}, nil
}

// String names the strategy honestly: "Local SGD (QSR α = 0.2, Hbase = 2)",
// "Local AdamW with H = 1", …
func (l *Local) String() string { return "Local " + l.describe() }

// Setup implements train.Strategy: it checks that the workers hold the
// same model and, on a fresh run, copies rank 0's parameters and buffers to
// the others; it lays out the flat buffer of what is averaged and chooses
// the first round's H.
func (l *Local) Setup(s *train.StepContext) error {
	if err := l.begin(s); err != nil {
		return err
	}
	for _, field := range l.fields {
		so, ok := s.Optimizer.(interface {
			StateBuffers(string) ([]*autograd.Var, []*tensor.Tensor, error)
		})
		if !ok {
			return fmt.Errorf("local: average-state: optimizer %T exposes no state buffers", s.Optimizer)
		}
		ps, bufs, err := so.StateBuffers(field)
		if err != nil {
			return fmt.Errorf("local: average-state: %w", err)
		}
		byVar := map[*autograd.Var]*tensor.Tensor{}
		for i, p := range ps {
			byVar[p] = bufs[i]
		}
		for _, p := range l.params {
			b, ok := byVar[p.Param]
			if !ok {
				return fmt.Errorf("local: average-state: parameter %s is not the optimizer's", p.Name)
			}
			l.state = append(l.state, b)
		}
	}
	if err := l.layout(); err != nil {
		return err
	}
	if l.stream != nil {
		return l.streamSetup()
	}
	if !l.quant.On() {
		return nil
	}
	l.ref = tensor.Zeros(tensor.Shape{l.fp.Elements()}, tensor.On(l.flat.Device()))
	if l.loadRef != nil {
		if l.loadRef.NumElements() != l.ref.NumElements() {
			return fmt.Errorf("local: the checkpoint's reference has %d elements, this model's parameters %d", l.loadRef.NumElements(), l.ref.NumElements())
		}
		l.ref.CopyFrom(l.loadRef)
		l.loadRef.Release()
		l.loadRef = nil
		return nil
	}
	l.fp.Gather()
	head := l.head()
	defer head.Release()
	l.ref.CopyFrom(head)
	return nil
}

// AfterBackward implements train.Strategy; local steps need nothing.
func (l *Local) AfterBackward(*train.StepContext) error { return nil }

// AfterStep implements train.Strategy: at the end of a round it averages
// the parameters (and the chosen optimizer state) and chooses the next H.
func (l *Local) AfterStep(s *train.StepContext) error {
	if l.stream != nil {
		return l.streamStep(s)
	}
	done, err := l.step(s)
	if err != nil {
		return err
	}
	if !done {
		if l.innerDue(s) {
			if err := l.innerSync(); err != nil {
				return fmt.Errorf("local: node synchronization at step %d: %w", s.Step+1, err)
			}
		}
		return nil
	}
	d, err := l.synchronize(s)
	if err == nil {
		err = l.endRound(s, d)
	}
	if err != nil {
		return fmt.Errorf("local: synchronization at step %d: %w", s.Step+1, err)
	}
	return nil
}

// State implements train.Stateful: the round, the accounting and, under
// quantization, the reference and the residual.
func (l *Local) State() (map[string]*tensor.Tensor, map[string]string) {
	if l.stream != nil {
		// The accounting must hold the all-reduce in flight.
		_ = l.wait()
	}
	ts := l.quantState()
	if l.ref != nil {
		ts["sync.ref"] = l.ref.Clone()
	}
	sc := l.scalars()
	if l.stream != nil {
		l.streamState(ts, sc)
	}
	return ts, sc
}

// LoadState implements train.Stateful. It runs before Setup.
func (l *Local) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	if err := l.loadScalars(sc); err != nil {
		return err
	}
	ts, err := l.loadQuantState(ts)
	if err == nil {
		ts, err = l.loadStreamState(ts, sc)
	}
	if err != nil {
		return err
	}
	if ref, ok := ts["sync.ref"]; ok && l.quant.On() {
		l.loadRef = ref.To(cpu.Default())
		delete(ts, "sync.ref")
	}
	if len(ts) > 0 {
		return errors.New("local: unexpected tensors in the strategy's state")
	}
	if l.quant.On() && l.loadRef == nil {
		return errors.New("local: the checkpoint lacks the reference of quantized synchronization")
	}
	return nil
}

// Close frees the strategy's buffers; the Comm stays open, owned by the
// caller.
func (l *Local) Close() {
	l.streamClose()
	l.release()
	for _, t := range []*tensor.Tensor{l.ref, l.loadRef} {
		if t != nil {
			t.Release()
		}
	}
	l.ref, l.loadRef = nil, nil
}

// localSample is the size of the consensus sample of Local and DiLoCo,
// which is read where it lies and never sent: models of up to 2¹⁷
// parameters are measured exactly.
const localSample = 1 << 17

// core is what Local and DiLoCo share: rounds over the flat buffer of the
// parameters (train.FlatParams), with train.CommAccount's accounting,
// pending consensus and averaging for evaluation.
type core struct {
	*train.CommAccount
	kind  string
	sched SyncSchedule
	bnN   int

	optName   string
	params    []nn.NamedParameter // those that require a gradient
	gradBytes int64
	// state are the optimizer state tensors averaged with the parameters
	// (Options.AverageState); fp lays out the parameters, state and two
	// more elements, in which each worker sends its consensus distance of
	// the previous synchronization and whether it was interrupted.
	state  []*tensor.Tensor
	fp     *train.FlatParams
	flat   *tensor.Tensor // fp.Flat
	slots  *tensor.Tensor // flat's last two elements
	sample *train.ConsensusSample
	mine   []float64 // θ_k's sampled values before a synchronization

	// The round: it started at step start and lasts h steps; synced
	// reports whether the workers' parameters are equal now (after Setup
	// of a fresh run and after every synchronization).
	start, h int
	synced   bool

	// quant is Options.Quantization; residual what it took from this
	// worker's contributions so far (with error feedback), loadResidual
	// a checkpoint's until Setup.
	quant                  train.Quantization
	residual, loadResidual []float32
	// The inner level of a two-level run: the node's communicator, behind
	// the account's node meter.
	nodeSize, innerH int
	nodeComm         dist.Comm
	node             *dist.Meter

	// stream is Local's streaming synchronization (nil: whole).
	stream *stream

	// ref holds Local's parameters (and averaged state) of the last
	// synchronization under quantization, which averages the change
	// since then; loadRef is a checkpoint's, until Setup.
	ref, loadRef *tensor.Tensor
}

func newCore(c dist.Comm, opt Options, kind string) (core, error) {
	if c == nil {
		return core{}, fmt.Errorf("%s: nil Comm", kind)
	}
	if err := Validate(opt.Schedule); err != nil {
		return core{}, err
	}
	if opt.BNBatches < 0 {
		return core{}, fmt.Errorf("%s: BNBatches %d: want ≥ 0", kind, opt.BNBatches)
	}
	if err := opt.Quantization.Validate(); err != nil {
		return core{}, fmt.Errorf("%s: %w", kind, err)
	}
	if opt.Quantization.ErrorFeedback && !opt.Quantization.On() {
		return core{}, fmt.Errorf("%s: error feedback without quantization", kind)
	}
	switch {
	case opt.NodeSize < 0 || opt.InnerH < 0:
		return core{}, fmt.Errorf("%s: node size %d, inner H %d: want ≥ 0", kind, opt.NodeSize, opt.InnerH)
	case (opt.NodeSize > 0) != (opt.InnerH > 0):
		return core{}, fmt.Errorf("%s: node size %d with inner H %d: a two-level run needs both", kind, opt.NodeSize, opt.InnerH)
	case opt.NodeSize > 0 && c.Size()%opt.NodeSize != 0:
		return core{}, fmt.Errorf("%s: %d workers do not split into nodes of %d", kind, c.Size(), opt.NodeSize)
	}
	st, err := newStream(opt, kind)
	if err != nil {
		return core{}, err
	}
	return core{CommAccount: train.NewCommAccount(c, opt.Context, kind), kind: kind, sched: opt.Schedule, bnN: opt.BNBatches, optName: opt.Optimizer,
		quant: opt.Quantization, nodeSize: opt.NodeSize, innerH: opt.InnerH, stream: st}, nil
}

// Period returns the current round's start and H.
func (c *core) Period() (start, h int) { return c.start, c.h }

func (c *core) describe() string {
	opt := c.optName
	if opt == "" {
		opt = "SGD" // before Setup
	}
	q := ""
	if c.nodeSize > 0 {
		q = fmt.Sprintf(", averaged every %d steps inside nodes of %d", c.innerH, c.nodeSize)
	}
	if c.quant.On() {
		q += fmt.Sprintf(", synchronized in %d bits", c.quant.Bits)
		if c.quant.ErrorFeedback {
			q += " with error feedback"
		}
	}
	if c.stream != nil {
		q += ", streamed in " + c.stream.String()
	}
	if p, ok := c.sched.(Constant); ok && p.H == 1 {
		return opt + " with H = 1" + q
	}
	return fmt.Sprintf("%s (%v)%s", opt, c.sched, q)
}

func (c *core) begin(s *train.StepContext) error {
	if c.flat != nil {
		return fmt.Errorf("%s: Setup called twice", c.kind)
	}
	c.optName = optim.Name(s.Optimizer)
	var err error
	if c.params, c.gradBytes, err = train.Trainable(s.Params); err != nil {
		return fmt.Errorf("%s: %w", c.kind, err)
	}
	if !c.Loaded() {
		c.start, c.h, c.synced = s.Step, Next(c.sched, s.Schedule, s.Step, s.TotalSteps), true
	}
	if c.nodeSize > 0 {
		// Every worker takes part in making every node's group.
		world := c.Comm()
		err := c.Collective("node groups", func(ctx context.Context) error {
			for first := 0; first < world.Size(); first += c.nodeSize {
				ranks := make([]int, c.nodeSize)
				for i := range ranks {
					ranks[i] = first + i
				}
				g, err := world.NewGroup(ctx, ranks)
				if err != nil {
					return err
				}
				if g != nil {
					c.nodeComm = g
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		c.node = c.NodeLevel(c.nodeComm)
	}
	return c.StartModel(s, !c.Loaded())
}

// innerDue reports whether step s.Step, which does not close the round,
// closes one of the inner level's periods.
func (c *core) innerDue(s *train.StepContext) bool {
	return c.innerH > 0 && (s.Step+1-c.start)%c.innerH == 0
}

// innerSync averages the parameters (and averaged state) of this worker's
// node; the node's workers then hold bit-identical values.
func (c *core) innerSync() error {
	defer c.NodeSynced(time.Now())
	c.fp.Gather()
	head := c.head()
	defer head.Release()
	if err := c.Collective("node all-reduce", func(ctx context.Context) error {
		return c.node.AllReduce(ctx, head, dist.Avg)
	}); err != nil {
		return err
	}
	c.fp.Scatter()
	return nil
}

// layout lays the parameters and c.state out in the flat buffer.
func (c *core) layout() error {
	fp, err := train.NewFlatParams(c.Comm(), c.params, c.state, 2)
	if err != nil {
		return fmt.Errorf("%s: %w", c.kind, err)
	}
	c.fp, c.flat, c.slots = fp, fp.Flat, fp.Tail()
	// The sample stays here: it can be large.
	c.sample = train.NewConsensusSample(fp.Sizes(), localSample, c.flat.Device())
	if c.quant.ErrorFeedback {
		c.residual = make([]float32, fp.Elements())
		if c.loadResidual != nil {
			if len(c.loadResidual) != len(c.residual) {
				return fmt.Errorf("%s: the checkpoint's residual has %d elements, this model's parameters %d", c.kind, len(c.loadResidual), len(c.residual))
			}
			copy(c.residual, c.loadResidual)
			c.loadResidual = nil
		}
	}
	return nil
}

// head returns a view of the flat buffer without its tail: the values a
// synchronization averages.
func (c *core) head() *tensor.Tensor { return c.flat.Slice(0, 0, c.fp.Elements()) }

// mean replaces the flat buffer's values by their mean over the workers:
// in one all-reduce, or under quantization the head by
// train.QuantizedMean and the tail exactly, in an all-reduce of its own.
func (c *core) mean(ctx context.Context) error {
	if !c.quant.On() {
		return c.Meter.AllReduce(ctx, c.flat, dist.Avg)
	}
	head := c.head()
	defer head.Release()
	x := head.Float32s()
	if err := train.QuantizedMean(ctx, c.Meter, x, c.residual, c.quant); err != nil {
		return err
	}
	v := tensor.FromSlice(x, nil, tensor.On(head.Device()))
	head.CopyFrom(v)
	v.Release()
	return c.Meter.AllReduce(ctx, c.slots, dist.Avg)
}

// quantState returns the residual of error feedback, for a checkpoint.
func (c *core) quantState() map[string]*tensor.Tensor {
	ts := map[string]*tensor.Tensor{}
	if c.residual != nil {
		ts["sync.residual"] = tensor.FromSlice(c.residual, nil)
	}
	return ts
}

// loadQuantState takes the residual out of a checkpoint's tensors and
// returns the others.
func (c *core) loadQuantState(ts map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	r, ok := ts["sync.residual"]
	switch {
	case ok && !c.quant.ErrorFeedback:
		return nil, fmt.Errorf("%s: the checkpoint was written with error feedback, this run has none", c.kind)
	case !ok && c.quant.ErrorFeedback:
		return nil, fmt.Errorf("%s: the checkpoint lacks the residual of error feedback", c.kind)
	case !ok:
		return ts, nil
	}
	c.loadResidual = r.Float32s()
	rest := make(map[string]*tensor.Tensor, len(ts)-1)
	for k, t := range ts {
		if k != "sync.residual" {
			rest[k] = t
		}
	}
	return rest, nil
}

func (c *core) release() {
	if c.nodeComm != nil {
		c.nodeComm.Close()
		c.nodeComm, c.node = nil, nil
	}
	if c.fp != nil {
		c.fp.Release()
		c.fp, c.flat = nil, nil
	}
	if c.slots != nil {
		c.slots.Release()
		c.slots = nil
	}
	if c.sample != nil {
		c.sample.Release()
		c.sample = nil
	}
}

// step counts step s.Step as taken and reports whether it closes the round.
func (c *core) step(s *train.StepContext) (bool, error) {
	if c.flat == nil {
		return false, fmt.Errorf("%s: AfterStep before Setup", c.kind)
	}
	c.Stepped(c.gradBytes)
	c.synced = false
	return s.Step+1 >= c.start+c.h, nil
}

// endRound starts the next round after a synchronization at the end of
// step s.Step, choosing its H from the learning rate of the step after.
//
// Its sync record waits for the next synchronization, whose all-reduce
// carries the workers' consensus distances of this one in flat's last
// elements; the run's last synchronization averages them at once.
func (c *core) endRound(s *train.StepContext, cd float64) error {
	c.Pend(&train.PendingSync{Step: s.Step + 1, Epoch: s.Epoch + 1, H: c.h, LR: s.LR, Dist: cd})
	c.start = s.Step + 1
	c.synced = true
	c.Synced()
	if c.start < s.TotalSteps {
		c.h = Next(c.sched, s.Schedule, c.start, s.TotalSteps)
		return nil
	}
	return c.FlushConsensus(s)
}

// CoordinatesStop implements train.StopCoordinator: an interrupted worker
// says so in the next synchronization's all-reduce, and every worker stops
// right after it, at the same step.
func (c *core) CoordinatesStop() {}

// CheckpointsPerWorker implements train.WorkerCheckpoints: between
// synchronizations each worker's model and optimizer state are its own.
func (c *core) CheckpointsPerWorker() {}

// synchronize replaces each worker's parameters and state by their mean
// over the workers in one all-reduce of flat, which also carries the
// previous synchronization's consensus distances, and returns this
// worker's distance to the mean for the next one to carry.
func (c *core) synchronize(s *train.StepContext) (float64, error) {
	defer c.Block(time.Now())
	c.fp.Gather()
	c.mine = c.sample.Read(c.flat)
	var head *tensor.Tensor
	if c.ref != nil {
		// Under quantization the workers average their change since the
		// last synchronization.
		head = c.head()
		defer head.Release()
		head.AddScaledInPlace(-1, c.ref)
	}
	c.ConsensusSlotsTensor(s, c.slots)
	if err := c.Collective("all-reduce", c.mean); err != nil {
		return 0, err
	}
	if head != nil {
		head.AddInPlace(c.ref)
		c.ref.CopyFrom(head)
	}
	c.fp.Scatter()
	c.TakeSlotsTensor(s, c.slots)
	return c.sample.Distance(c.mine, c.sample.Read(c.flat)), nil
}

// BeforeEval implements train.EvalPreparer: mid-round the workers' average
// is evaluated; batch norm's running statistics are re-estimated on
// Options.BNBatches training micro-batches and averaged across the
// workers (train.CommAccount.AverageForEval).
func (c *core) BeforeEval(s *train.StepContext) (func() error, error) {
	if c.stream != nil {
		// The all-reduce in flight must end before the evaluation's
		// collectives; its merge stays where the run puts it.
		if err := c.wait(); err != nil {
			return nil, fmt.Errorf("%s: %w", c.kind, err)
		}
	}
	restore, err := c.AverageForEval(s, c.fp, train.EvalAverage{Params: !c.synced, BNBatches: c.bnN, BN: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.kind, err)
	}
	return restore, nil
}

// scalars returns the round and the accounting for a checkpoint.
func (c *core) scalars() map[string]string {
	sc := c.State()
	sc["kind"] = c.kind
	sc["round.start"] = strconv.Itoa(c.start)
	sc["round.h"] = strconv.Itoa(c.h)
	sc["synced"] = strconv.FormatBool(c.synced)
	sc["schedule"] = fmt.Sprint(c.sched)
	sc["averaged_state"] = fmt.Sprint(len(c.state))
	if c.quant.On() {
		sc["sync.quantization"] = fmt.Sprintf("%+v", c.quant)
	}
	if c.nodeSize > 0 {
		sc["levels"] = fmt.Sprintf("nodes of %d, inner H %d", c.nodeSize, c.innerH)
	}
	return sc
}

// loadScalars restores what scalars saved. It runs before Setup.
func (c *core) loadScalars(sc map[string]string) error {
	if sc["kind"] != c.kind {
		return fmt.Errorf("%s: the checkpoint's strategy is %q", c.kind, sc["kind"])
	}
	start, e1 := strconv.Atoi(sc["round.start"])
	h, e2 := strconv.Atoi(sc["round.h"])
	synced, e3 := strconv.ParseBool(sc["synced"])
	if err := errors.Join(e1, e2, e3); err != nil {
		return fmt.Errorf("%s: state: %w", c.kind, err)
	}
	if start < 0 || h < 1 {
		return fmt.Errorf("%s: state: round from step %d with H = %d", c.kind, start, h)
	}
	if got := fmt.Sprint(c.sched); sc["schedule"] != got {
		return fmt.Errorf("%s: the checkpoint was written under %s, this run has %s", c.kind, sc["schedule"], got)
	}
	if got := ""; c.nodeSize > 0 || sc["levels"] != "" {
		if c.nodeSize > 0 {
			got = fmt.Sprintf("nodes of %d, inner H %d", c.nodeSize, c.innerH)
		}
		if sc["levels"] != got {
			return fmt.Errorf("%s: the checkpoint's levels are %q, this run's %q", c.kind, sc["levels"], got)
		}
	}
	if got := ""; c.quant.On() || sc["sync.quantization"] != "" {
		if c.quant.On() {
			got = fmt.Sprintf("%+v", c.quant)
		}
		if sc["sync.quantization"] != got {
			return fmt.Errorf("%s: the checkpoint's synchronization quantization is %q, this run's %q", c.kind, sc["sync.quantization"], got)
		}
	}
	if err := c.LoadState(sc); err != nil {
		return err
	}
	c.start, c.h, c.synced = start, h, synced
	return nil
}
