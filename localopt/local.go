package localopt

import (
	"context"
	"errors"
	"fmt"
	"math"
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
			l.avg = append(l.avg, b)
		}
	}
	return l.layout()
}

// AfterBackward implements train.Strategy; local steps need nothing.
func (l *Local) AfterBackward(*train.StepContext) error { return nil }

// AfterStep implements train.Strategy: at the end of a round it averages
// the parameters (and the chosen optimizer state) and chooses the next H.
func (l *Local) AfterStep(s *train.StepContext) error {
	done, err := l.step(s)
	if err != nil || !done {
		return err
	}
	d, err := l.average(s, l.flat, l.avg, true)
	if err == nil {
		err = l.endRound(s, d)
	}
	if err != nil {
		return fmt.Errorf("local: synchronization at step %d: %w", s.Step+1, err)
	}
	return nil
}

// State implements train.Stateful.
func (l *Local) State() (map[string]*tensor.Tensor, map[string]string) {
	return map[string]*tensor.Tensor{}, l.scalars()
}

// LoadState implements train.Stateful.
func (l *Local) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	if len(ts) > 0 {
		return errors.New("local: unexpected tensors in the strategy's state")
	}
	return l.loadScalars(sc)
}

// Close frees the strategy's buffers; the Comm stays open, owned by the
// caller.
func (l *Local) Close() { l.release() }

// core is what Local and DiLoCo share: rounds, the flat buffer of the
// parameters, accounting, and the evaluation of the workers' average.
type core struct {
	comm  dist.Comm
	meter *dist.Meter
	ctx   context.Context
	kind  string
	sched SyncSchedule
	bnN   int

	optName string
	params  []nn.NamedParameter // those that require a gradient
	// avg are the tensors averaged at a synchronization, the parameters'
	// values first; flat holds them end to end on the Comm's device
	// (dist.DeviceOf); views are flat's parts in avg's shapes.
	avg    []*tensor.Tensor
	flat   *tensor.Tensor
	views  []*tensor.Tensor
	nParam int // elements of the parameters' part of flat
	// inPlace reports that the parameters live in flat (their values are
	// views of it).
	inPlace bool
	// samples are the runs of flat's parameter elements on which the
	// consensus distance is measured; sampleK holds θ_k's before a
	// synchronization. slots are flat's last two elements, in which each
	// worker sends its distance of the previous synchronization and 1 if
	// it was interrupted (0 otherwise).
	samples []sampled
	sampleK []float64
	slots   *tensor.Tensor
	// pending is the last synchronization, whose record waits for the
	// workers' mean distance, and dist this worker's distance at it.
	pending *train.PendingSync

	// The round: it started at step start and lasts h steps; synced
	// reports whether the workers' parameters are equal now (after Setup
	// of a fresh run and after every synchronization).
	start, h int
	synced   bool
	loaded   bool

	// Accounting, checkpointed so that a resumed run's records go on.
	setup, eval, base dist.Traffic // base: training traffic before a resume
	blocked           time.Duration
	syncs             int64
	dpBytes           int64
	consensus         float64
	gradBytes         int64
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
	ctx := opt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return core{comm: c, meter: dist.NewMeter(c), ctx: ctx, kind: kind, sched: opt.Schedule, bnN: opt.BNBatches}, nil
}

// Comm returns the communicator the strategy works over.
func (c *core) Comm() dist.Comm { return c.comm }

// Period returns the current round's start and H.
func (c *core) Period() (start, h int) { return c.start, c.h }

func (c *core) describe() string {
	opt := c.optName
	if opt == "" {
		opt = "SGD" // before Setup
	}
	if p, ok := c.sched.(Constant); ok && p.H == 1 {
		return opt + " with H = 1"
	}
	return fmt.Sprintf("%s (%v)", opt, c.sched)
}

// collective runs op under the strategy's context.
func (c *core) collective(what string, op func(ctx context.Context) error) error {
	ctx, cancel := dist.WithDefaultTimeout(c.ctx, dist.DefaultTimeout)
	defer cancel()
	if err := op(ctx); err != nil {
		return fmt.Errorf("%s: %s: %w", c.kind, what, err)
	}
	return nil
}

func (c *core) begin(s *train.StepContext) error {
	if c.flat != nil {
		return fmt.Errorf("%s: Setup called twice", c.kind)
	}
	c.optName = optim.Name(s.Optimizer)
	for _, p := range s.Params {
		if p.Param.RequiresGrad() {
			c.params = append(c.params, p)
			c.avg = append(c.avg, p.Param.Value)
			c.gradBytes += int64(p.Param.Value.NumElements() * p.Param.Value.DType().Size())
		}
	}
	if len(c.params) == 0 {
		return fmt.Errorf("%s: the model has no parameter that requires a gradient", c.kind)
	}
	var err error
	if c.loaded {
		err = c.collective("check model", func(ctx context.Context) error { return train.CheckSameModel(ctx, c.meter, s) })
	} else {
		err = c.collective("broadcast model", func(ctx context.Context) error { return train.BroadcastModel(ctx, c.meter, s) })
		c.start, c.h, c.synced = s.Step, Next(c.sched, s.Schedule, s.Step, s.TotalSteps), true
	}
	if err != nil {
		return err
	}
	c.setup = c.setup.Add(c.meter.Traffic())
	return nil
}

// layout allocates flat and its views for avg, which must share a dtype.
// flat lives where the Comm takes its operands (dist.DeviceOf). When the
// Comm can take every parameter where it lies (dist.Holds: host tensors for
// a host transport, tensors on its GPU for NCCL), the parameters move into
// flat's first nParam elements for good — their Vars' values become views of it —
// so that a synchronization all-reduces them in place, with no copy in or
// out (the layout of llm.c: one allocation, one all-reduce). Optimizer state
// is copied in and out.
func (c *core) layout() error {
	dt := c.avg[0].DType()
	n := 0
	c.inPlace = true
	for i, t := range c.avg {
		if t.DType() != dt {
			return fmt.Errorf("%s: tensor %d to average is %v, the first is %v (one dtype per model)", c.kind, i, t.DType(), dt)
		}
		if i < len(c.params) {
			c.nParam += t.NumElements()
			c.inPlace = c.inPlace && dist.Holds(c.comm, t)
		}
		n += t.NumElements()
	}
	// Two more elements carry each worker's consensus distance of the
	// previous synchronization and whether it was interrupted.
	c.flat = tensor.Zeros(tensor.Shape{n + 2}, tensor.Of(dt), tensor.On(dist.DeviceOf(c.comm)))
	c.slots = c.flat.Slice(0, n, n+2)
	off := 0
	for i, t := range c.avg {
		part := c.flat.Slice(0, off, off+t.NumElements())
		c.views = append(c.views, part.View(t.Shape()...))
		if c.inPlace && i < len(c.params) {
			v := part.View(t.Shape()...)
			v.CopyFrom(t)
			p := c.params[i].Param
			p.Value.Release()
			p.Value = v
			c.avg[i] = v
		}
		part.Release()
		off += t.NumElements()
	}
	sizes := make([]int, len(c.params))
	for i, p := range c.params {
		sizes[i] = p.Param.Value.NumElements()
	}
	c.samples = sampleRuns(sizes)
	m := 0
	for _, r := range c.samples {
		m += r.end - r.start
	}
	c.sampleK = make([]float64, m)
	return nil
}

// Consensus sampling: models of up to maxExact parameters are measured on
// every coordinate. Larger ones are measured on runs of sampleRun
// consecutive elements, about maxExact in all, stratified by tensor: each
// parameter tensor gets runs evenly spaced through it in proportion to its
// size (a tensor of at most sampleRun elements is read whole), and its
// sums are scaled by its elements over its samples. Distances between
// layers differ far more than within one, so the stratified estimate is
// close (within a few percent on ResNets) at the cost of a few hundred
// runs read — a small fraction of a synchronization's time, where reading
// every parameter twice would cost a tenth of it.
const (
	maxExact  = 1 << 17
	sampleRun = 1 << 9
)

// sampled is a run of flat's parameter elements and the weight of its
// squares in the estimate.
type sampled struct {
	start, end int
	weight     float64
}

// sampleRuns returns the runs on which the consensus distance of
// parameters of the given sizes (laid end to end) is measured.
func sampleRuns(sizes []int) []sampled {
	n := 0
	for _, s := range sizes {
		n += s
	}
	if n <= maxExact {
		return []sampled{{0, n, 1}}
	}
	var runs []sampled
	off := 0
	for _, s := range sizes {
		if s <= sampleRun {
			runs = append(runs, sampled{off, off + s, 1})
			off += s
			continue
		}
		k := max(1, int(math.Round(float64(maxExact)*float64(s)/float64(n)/sampleRun)))
		k = min(k, s/sampleRun)
		w := float64(s) / float64(k*sampleRun)
		for i := range k {
			start := off
			if k > 1 {
				start += int(int64(i) * int64(s-sampleRun) / int64(k-1))
			}
			runs = append(runs, sampled{start, start + sampleRun, w})
		}
		off += s
	}
	return runs
}

// sampleParams copies θ_k's sampled elements, from flat, into sampleK.
func (c *core) sampleParams() {
	if f, ok := tensor.HostFloat32s(c.flat); ok {
		k := 0
		for _, r := range c.samples {
			for _, v := range f[r.start:r.end] {
				c.sampleK[k] = float64(v)
				k++
			}
		}
		return
	}
	k := 0
	for _, r := range c.samples {
		part := c.flat.Slice(0, r.start, r.end)
		k += copy(c.sampleK[k:], tensor.ToSlice[float64](part))
		part.Release()
	}
}

// distance returns ‖θ_k − θ̄‖ / ‖θ̄‖ over the sampled elements, with θ_k's
// in sampleK and θ̄ in flat.
func (c *core) distance() float64 {
	var d2, n2 float64
	f, host := tensor.HostFloat32s(c.flat)
	k := 0
	for _, r := range c.samples {
		mine := c.sampleK[k : k+r.end-r.start]
		var rd, rn float64
		if host {
			for i, v := range f[r.start:r.end] {
				e := mine[i] - float64(v)
				rd += e * e
				rn += float64(v) * float64(v)
			}
		} else {
			part := c.flat.Slice(0, r.start, r.end)
			for i, v := range tensor.ToSlice[float64](part) {
				e := mine[i] - v
				rd += e * e
				rn += v * v
			}
			part.Release()
		}
		d2 += r.weight * rd
		n2 += r.weight * rn
		k += r.end - r.start
	}
	if n2 == 0 {
		return 0
	}
	return math.Sqrt(d2 / n2)
}

func (c *core) release() {
	for _, v := range c.views {
		v.Release()
	}
	c.views = nil
	if c.flat != nil {
		c.flat.Release()
		c.flat = nil
	}
	if c.slots != nil {
		c.slots.Release()
		c.slots = nil
	}
}

// step counts step s.Step as taken and reports whether it closes the round.
func (c *core) step(s *train.StepContext) (bool, error) {
	if c.flat == nil {
		return false, fmt.Errorf("%s: AfterStep before Setup", c.kind)
	}
	c.dpBytes += dist.AllReduceBytes(c.gradBytes, c.comm.Size())
	c.synced = false
	return s.Step+1 >= c.start+c.h, nil
}

// endRound starts the next round after a synchronization at the end of
// step s.Step, choosing its H from the learning rate of the step after.
//
// Its sync record waits for the next synchronization, whose all-reduce
// carries the workers' consensus distances of this one in flat's last
// element; the run's last synchronization averages them at once.
func (c *core) endRound(s *train.StepContext, cd float64) error {
	c.pending = &train.PendingSync{Step: s.Step + 1, Epoch: s.Epoch + 1, H: c.h, LR: s.LR, Dist: cd}
	c.start = s.Step + 1
	c.synced = true
	c.syncs++
	if c.start < s.TotalSteps {
		c.h = Next(c.sched, s.Schedule, c.start, s.TotalSteps)
		return nil
	}
	return c.flushConsensus(s)
}

// sendSlots puts this worker's distance of the pending synchronization
// and its interruption in flat's last two elements, before an all-reduce.
func (c *core) sendSlots(s *train.StepContext) {
	var d, stop float64
	if c.pending != nil {
		d = c.pending.Dist
	}
	if s.Interrupted() {
		stop = 1
	}
	v := tensor.FromSlice([]float64{d, stop}, tensor.Shape{2}, tensor.On(cpu.Default()))
	defer v.Release()
	w := v.Cast(c.slots.DType())
	defer w.Release()
	c.slots.CopyFrom(w)
}

// receiveSlots reads the workers' mean distance after the all-reduce,
// emits the pending synchronization's record, and stops every worker at
// this step when one of them was interrupted.
func (c *core) receiveSlots(s *train.StepContext) {
	v := tensor.ToSlice[float64](c.slots)
	c.receiveConsensus(s, v[0])
	if v[1] > 0 {
		s.Stop()
	}
}

// receiveConsensus records the workers' mean distance d of the pending
// synchronization and emits its record.
func (c *core) receiveConsensus(s *train.StepContext, d float64) {
	if c.pending == nil {
		return
	}
	c.consensus = d
	p := c.pending
	c.pending = nil
	p.Emit(s, c.stats())
}

// flushConsensus averages the pending distance on its own, at the end of
// the run.
func (c *core) flushConsensus(s *train.StepContext) error {
	if c.pending == nil {
		return nil
	}
	var mean float64
	if err := c.collective("consensus distance", func(ctx context.Context) (err error) {
		mean, err = dist.Mean(ctx, c.meter, c.pending.Dist)
		return err
	}); err != nil {
		return err
	}
	c.receiveConsensus(s, mean)
	return nil
}

// CoordinatesStop implements train.StopCoordinator: an interrupted worker
// says so in the next synchronization's all-reduce, and every worker stops
// right after it, at the same step.
func (c *core) CoordinatesStop() {}

// average replaces each worker's tensors avg with their mean over the
// workers through flat (whose views match avg). With consensus it is a
// synchronization: the all-reduce also carries the previous one's
// consensus distances, and it returns this worker's distance to the mean
// for the next one to carry.
func (c *core) average(s *train.StepContext, flat *tensor.Tensor, avg []*tensor.Tensor, consensus bool) (float64, error) {
	start := time.Now()
	defer func() { c.blocked += time.Since(start) }()
	c.gather(avg)
	if consensus {
		c.sampleParams()
		c.sendSlots(s)
	}
	if err := c.collective("all-reduce", func(ctx context.Context) error {
		return c.meter.AllReduce(ctx, flat, dist.Avg)
	}); err != nil {
		return 0, err
	}
	c.scatter(avg)
	if !consensus {
		return 0, nil
	}
	c.receiveSlots(s)
	return c.distance(), nil
}

// gather copies the tensors of avg that do not live in flat into their
// views; scatter copies them back.
func (c *core) gather(avg []*tensor.Tensor) {
	for i, t := range avg {
		if !c.inPlace || i >= len(c.params) {
			c.views[i].CopyFrom(t)
		}
	}
}

func (c *core) scatter(avg []*tensor.Tensor) {
	for i, t := range avg {
		if !c.inPlace || i >= len(c.params) {
			t.CopyFrom(c.views[i])
		}
	}
}

// stats returns the accounting so far.
func (c *core) stats() train.CommStats {
	tr := c.base.Add(c.meter.Traffic()).Sub(c.setup).Sub(c.eval)
	return train.CommStats{
		Sent: tr.Sent, Received: tr.Received, Collectives: tr.Ops,
		Blocked: c.blocked.Seconds(), Syncs: c.syncs,
		SetupBytes:        c.setup.Sent + c.setup.Received,
		EvalBytes:         c.eval.Sent + c.eval.Received,
		DataParallelBytes: c.dpBytes,
		Consensus:         c.consensus,
	}
}

// CommStats implements train.CommReporter.
func (c *core) CommStats() train.CommStats { return c.stats() }

// BeforeEval implements train.EvalPreparer: mid-round it saves each
// worker's parameters and puts the workers' average in their place; it
// re-estimates batch norm's running statistics on Options.BNBatches
// training micro-batches, averages them across the workers, and returns the
// function that restores what was saved. The bytes it moves count as
// evaluation traffic, apart from training's.
func (c *core) BeforeEval(s *train.StepContext) (func() error, error) {
	before := c.meter.Traffic()
	blocked := c.blocked
	defer func() {
		c.eval = c.eval.Add(c.meter.Traffic().Sub(before))
		c.blocked = blocked
	}()
	var saved []*tensor.Tensor
	var bns []*nn.BatchNorm2d
	var bnSaved []*tensor.Tensor
	restore := func() error {
		for i, t := range saved {
			c.avg[i].CopyFrom(t)
			t.Release()
		}
		saved = nil
		for i, bn := range bns {
			bn.RunningMean.CopyFrom(bnSaved[3*i])
			bn.RunningVar.CopyFrom(bnSaved[3*i+1])
			bn.NumBatchesTracked.CopyFrom(bnSaved[3*i+2])
		}
		for _, t := range bnSaved {
			t.Release()
		}
		bnSaved = nil
		return nil
	}
	if !c.synced {
		for i := range c.params {
			saved = append(saved, c.avg[i].Clone())
		}
		part := c.flat.Slice(0, 0, c.nParam)
		_, err := c.average(s, part, c.avg[:len(c.params)], false)
		part.Release()
		if err != nil {
			restore()
			return nil, fmt.Errorf("average for evaluation: %w", err)
		}
	}
	for _, m := range nn.NamedModules(s.Model) {
		if bn, ok := m.Module.(*nn.BatchNorm2d); ok && bn.RunningMean != nil {
			bns = append(bns, bn)
			bnSaved = append(bnSaved, bn.RunningMean.Clone(), bn.RunningVar.Clone(), bn.NumBatchesTracked.Clone())
		}
	}
	if len(bns) == 0 {
		return restore, nil
	}
	if c.bnN > 0 {
		if err := ReestimateBN(s, bns, c.bnN); err != nil {
			restore()
			return nil, err
		}
	}
	if err := c.averageBN(bns); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

// ReestimateBN recomputes the running statistics of bns as the cumulative
// average (PyTorch's momentum=None) over n training micro-batches of s's
// worker, forward passes in training mode without gradients, as
// torch.optim.swa_utils.update_bn does. The rest of the model is unchanged.
func ReestimateBN(s *train.StepContext, bns []*nn.BatchNorm2d, n int) error {
	training := s.Model.Training()
	cumulative := make([]bool, len(bns))
	for i, bn := range bns {
		bn.RunningMean.Fill(0)
		bn.RunningVar.Fill(1)
		bn.NumBatchesTracked.Fill(0)
		cumulative[i], bn.CumulativeAverage = bn.CumulativeAverage, true
	}
	nn.Train(s.Model)
	err := s.TrainBatches(n, func(x *tensor.Tensor) {
		in := autograd.Const(x.Retain())
		out := s.Model.Forward(in)
		in.Release()
		out.Release()
	})
	for i, bn := range bns {
		bn.CumulativeAverage = cumulative[i]
	}
	s.Model.SetTraining(training)
	if err != nil {
		return fmt.Errorf("re-estimate batch norm: %w", err)
	}
	return nil
}

// averageBN replaces the running means and variances of bns by their
// averages over the workers.
func (c *core) averageBN(bns []*nn.BatchNorm2d) error {
	n := 0
	for _, bn := range bns {
		n += 2 * bn.Features
	}
	flat := tensor.Zeros(tensor.Shape{n}, tensor.Of(bns[0].RunningMean.DType()), tensor.On(dist.DeviceOf(c.comm)))
	defer flat.Release()
	parts := func(f func(part, t *tensor.Tensor)) {
		off := 0
		for _, bn := range bns {
			for _, t := range []*tensor.Tensor{bn.RunningMean, bn.RunningVar} {
				part := flat.Slice(0, off, off+t.NumElements())
				f(part, t)
				part.Release()
				off += t.NumElements()
			}
		}
	}
	parts(func(part, t *tensor.Tensor) { part.CopyFrom(t) })
	if err := c.collective("average batch-norm statistics", func(ctx context.Context) error {
		return c.meter.AllReduce(ctx, flat, dist.Avg)
	}); err != nil {
		return err
	}
	parts(func(part, t *tensor.Tensor) { t.CopyFrom(part) })
	return nil
}

// scalars returns the round and the accounting for a checkpoint.
func (c *core) scalars() map[string]string {
	tr := c.base.Add(c.meter.Traffic())
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	return map[string]string{
		"kind":           c.kind,
		"round.start":    strconv.Itoa(c.start),
		"round.h":        strconv.Itoa(c.h),
		"synced":         strconv.FormatBool(c.synced),
		"syncs":          i64(c.syncs),
		"dp_bytes":       i64(c.dpBytes),
		"consensus":      strconv.FormatFloat(c.consensus, 'g', -1, 64),
		"blocked_ns":     i64(int64(c.blocked)),
		"traffic.sent":   i64(tr.Sent),
		"traffic.recv":   i64(tr.Received),
		"traffic.ops":    i64(tr.Ops),
		"setup.sent":     i64(c.setup.Sent),
		"setup.recv":     i64(c.setup.Received),
		"setup.ops":      i64(c.setup.Ops),
		"eval.sent":      i64(c.eval.Sent),
		"eval.recv":      i64(c.eval.Received),
		"eval.ops":       i64(c.eval.Ops),
		"schedule":       fmt.Sprint(c.sched),
		"pending":        train.EncodePendingSync(c.pending),
		"averaged_state": fmt.Sprint(len(c.avg) - len(c.params)),
	}
}

// loadScalars restores what scalars saved. It runs before Setup.
func (c *core) loadScalars(sc map[string]string) error {
	if sc["kind"] != c.kind {
		return fmt.Errorf("%s: the checkpoint's strategy is %q", c.kind, sc["kind"])
	}
	var err error
	geti := func(k string) int64 {
		v, e := strconv.ParseInt(sc[k], 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%s: state %s %q: %w", c.kind, k, sc[k], e)
		}
		return v
	}
	start, h := int(geti("round.start")), int(geti("round.h"))
	syncs, dpBytes, blocked := geti("syncs"), geti("dp_bytes"), geti("blocked_ns")
	base := dist.Traffic{Sent: geti("traffic.sent"), Received: geti("traffic.recv"), Ops: geti("traffic.ops")}
	setup := dist.Traffic{Sent: geti("setup.sent"), Received: geti("setup.recv"), Ops: geti("setup.ops")}
	eval := dist.Traffic{Sent: geti("eval.sent"), Received: geti("eval.recv"), Ops: geti("eval.ops")}
	synced, e1 := strconv.ParseBool(sc["synced"])
	consensus, e2 := strconv.ParseFloat(sc["consensus"], 64)
	if err = errors.Join(err, e1, e2); err != nil {
		return fmt.Errorf("%s: state: %w", c.kind, err)
	}
	if start < 0 || h < 1 {
		return fmt.Errorf("%s: state: round from step %d with H = %d", c.kind, start, h)
	}
	if got := fmt.Sprint(c.sched); sc["schedule"] != got {
		return fmt.Errorf("%s: the checkpoint was written under %s, this run has %s", c.kind, sc["schedule"], got)
	}
	c.start, c.h, c.synced, c.loaded = start, h, synced, true
	c.syncs, c.dpBytes, c.blocked, c.consensus = syncs, dpBytes, time.Duration(blocked), consensus
	c.base, c.setup, c.eval = base, setup, eval
	p, err := train.DecodePendingSync(sc["pending"])
	if err != nil {
		return fmt.Errorf("%s: state: %w", c.kind, err)
	}
	c.pending = p
	return nil
}
