package train

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// CommAccount is what every communicating strategy keeps besides its
// algorithm: its Comm behind a dist.Meter, the context that bounds its
// collectives, the count of what it sent (training apart from setup and
// evaluation), the time it blocked, its synchronizations, what data
// parallelism would have sent, and the consensus distance of its last
// synchronization — the pending one whose workers' mean rides in the next
// collective. State and LoadState carry all of it through a checkpoint, so
// that a resumed run's counts go on where they stopped.
type CommAccount struct {
	// Meter is the Comm every collective of the strategy goes through.
	Meter *dist.Meter
	who   string
	ctx   context.Context

	setup, eval, base dist.Traffic // base: training traffic before a resume
	blocked           time.Duration
	syncs             int64
	dpBytes           int64
	consensus         float64
	pending           *PendingSync
	loaded            bool

	// The inner level of a two-level run (NodeLevel): its meter, its
	// traffic before a resume, its synchronizations and blocked time.
	node        *dist.Meter
	nodeBase    dist.Traffic
	nodeSyncs   int64
	nodeBlocked time.Duration
}

// NewCommAccount returns the account of strategy who over c; ctx bounds
// every collective (nil: context.Background, so that each is bounded by
// dist.DefaultTimeout).
func NewCommAccount(c dist.Comm, ctx context.Context, who string) *CommAccount {
	if ctx == nil {
		ctx = context.Background()
	}
	return &CommAccount{Meter: dist.NewMeter(c), who: who, ctx: ctx}
}

// Comm returns the communicator.
func (a *CommAccount) Comm() dist.Comm { return a.Meter }

// Context returns the context that bounds the collectives.
func (a *CommAccount) Context() context.Context { return a.ctx }

// Loaded reports whether LoadState restored the account from a checkpoint.
func (a *CommAccount) Loaded() bool { return a.loaded }

// Collective runs op with the account's context, bounded by
// dist.DefaultTimeout when that context has no deadline, and wraps its
// error with the strategy's name and what was being done.
func (a *CommAccount) Collective(what string, op func(ctx context.Context) error) error {
	ctx, cancel := dist.WithDefaultTimeout(a.ctx, dist.DefaultTimeout)
	defer cancel()
	if err := op(ctx); err != nil {
		return fmt.Errorf("%s: %s: %w", a.who, what, err)
	}
	return nil
}

// Block adds the time since start to the time the training loop waited on
// communication: `defer a.Block(time.Now())` around a synchronization.
func (a *CommAccount) Block(start time.Time) { a.blocked += time.Since(start) }

// Synced counts a synchronization.
func (a *CommAccount) Synced() { a.syncs++ }

// Syncs returns the number of synchronizations so far.
func (a *CommAccount) Syncs() int64 { return a.syncs }

// Stepped counts what data parallelism would have sent for one step: an
// all-reduce of gradBytes.
func (a *CommAccount) Stepped(gradBytes int64) {
	a.dpBytes += dist.AllReduceBytes(gradBytes, a.Meter.Size())
}

// StartModel begins a run: on a fresh one it copies rank 0's parameters
// and buffers to every worker (BroadcastModel), on a resumed one it checks
// that the workers hold the same model (CheckSameModel). What it sends
// counts as setup.
func (a *CommAccount) StartModel(s *StepContext, broadcast bool) error {
	before := a.Meter.Traffic()
	var err error
	if broadcast {
		err = a.Collective("broadcast model", func(ctx context.Context) error { return BroadcastModel(ctx, a.Meter, s) })
	} else {
		err = a.Collective("check model", func(ctx context.Context) error { return CheckSameModel(ctx, a.Meter, s) })
	}
	a.setup = a.setup.Add(a.Meter.Traffic().Sub(before))
	return err
}

// SetupDone counts every byte moved so far as setup (a strategy that
// starts its model without StartModel), beside a resumed run's earlier
// setup.
func (a *CommAccount) SetupDone() { a.setup = a.setup.Add(a.Meter.Traffic()) }

// CommStats implements CommReporter: the counts so far. Strategies add
// what is theirs alone (LayersPerStep, Compute).
func (a *CommAccount) CommStats() CommStats {
	node := a.nodeTraffic()
	tr := a.base.Add(a.Meter.Traffic()).Sub(a.setup).Sub(a.eval).Add(node)
	return CommStats{
		Sent: tr.Sent, Received: tr.Received, Collectives: tr.Ops,
		Blocked: (a.blocked + a.nodeBlocked).Seconds(), Syncs: a.syncs,
		SetupBytes:        a.setup.Sent + a.setup.Received,
		EvalBytes:         a.eval.Sent + a.eval.Received,
		DataParallelBytes: a.dpBytes,
		Consensus:         a.consensus,
		InnerSent:         node.Sent,
		InnerSyncs:        a.nodeSyncs,
		InnerBlocked:      a.nodeBlocked.Seconds(),
	}
}

// NodeLevel gives the account an inner level over c, the communicator of
// this worker's node in a two-level run, and returns the Meter its
// collectives go through. The inner level's traffic, synchronizations
// and blocked time count in CommStats' totals and apart in its Inner
// fields, and survive checkpoints.
func (a *CommAccount) NodeLevel(c dist.Comm) *dist.Meter {
	a.node = dist.NewMeter(c)
	return a.node
}

// NodeSynced counts a synchronization of the inner level that blocked the
// training loop since start: `defer a.NodeSynced(time.Now())`.
func (a *CommAccount) NodeSynced(start time.Time) {
	a.nodeSyncs++
	a.nodeBlocked += time.Since(start)
}

// nodeTraffic is the inner level's traffic, the part before a resume
// included.
func (a *CommAccount) nodeTraffic() dist.Traffic {
	tr := a.nodeBase
	if a.node != nil {
		tr = tr.Add(a.node.Traffic())
	}
	return tr
}

// Pend makes p the pending synchronization, whose record waits for the
// workers' mean distance.
func (a *CommAccount) Pend(p *PendingSync) { a.pending = p }

// ConsensusSlots returns what a worker adds to a synchronization's
// collective, to be averaged with the rest: its distance of the pending
// synchronization and 1 when it was interrupted (0 otherwise).
func (a *CommAccount) ConsensusSlots(s *StepContext) [2]float64 {
	var v [2]float64
	if a.pending != nil {
		v[0] = a.pending.Dist
	}
	if s.Interrupted() {
		v[1] = 1
	}
	return v
}

// TakeSlots reads the workers' means of ConsensusSlots after the
// collective: it emits the pending synchronization's record and stops
// every worker at this step when one of them was interrupted.
func (a *CommAccount) TakeSlots(s *StepContext, mean [2]float64) {
	a.receiveConsensus(s, mean[0])
	if mean[1] > 0 {
		s.Stop()
	}
}

func (a *CommAccount) receiveConsensus(s *StepContext, mean float64) {
	if a.pending == nil {
		return
	}
	p := a.pending
	a.pending = nil
	a.consensus = mean
	p.Emit(s, a.CommStats())
}

// FlushConsensus averages the pending distance in a collective of its own
// (at the end of the run, when no synchronization follows) and emits its
// record. The wait counts as blocked, like any synchronization's.
func (a *CommAccount) FlushConsensus(s *StepContext) error {
	if a.pending == nil {
		return nil
	}
	defer a.Block(time.Now())
	var mean float64
	if err := a.Collective("consensus distance", func(ctx context.Context) (err error) {
		mean, err = dist.Mean(ctx, a.Meter, a.pending.Dist)
		return err
	}); err != nil {
		return err
	}
	a.receiveConsensus(s, mean)
	return nil
}

// ConsensusSlotsTensor writes ConsensusSlots into t (two elements of any
// dtype and device).
func (a *CommAccount) ConsensusSlotsTensor(s *StepContext, t *tensor.Tensor) {
	v := a.ConsensusSlots(s)
	h := tensor.FromSlice(v[:], tensor.Shape{2}, tensor.On(cpu.Default()))
	defer h.Release()
	w := h.Cast(t.DType())
	defer w.Release()
	t.CopyFrom(w)
}

// TakeSlotsTensor is TakeSlots reading the means from t.
func (a *CommAccount) TakeSlotsTensor(s *StepContext, t *tensor.Tensor) {
	v := tensor.ToSlice[float64](t)
	a.TakeSlots(s, [2]float64{v[0], v[1]})
}

// EvalAverage says what AverageForEval averages.
type EvalAverage struct {
	// Params averages the parameters (false when they are equal already).
	Params bool
	// BNBatches re-estimates batch norm's running statistics on that many
	// training micro-batches first (ReestimateBN); 0 keeps each worker's.
	BNBatches int
	// BN averages batch norm's running statistics over the workers.
	BN bool
}

// AverageForEval leaves in the model what an evaluation of the workers'
// average sees, as EvalPreparer.BeforeEval does: the parameters' mean over
// the workers and batch norm's statistics as what says, and returns the
// function that puts back the training state. The bytes it moves count as
// evaluation traffic and its time not as blocked.
func (a *CommAccount) AverageForEval(s *StepContext, f *FlatParams, what EvalAverage) (func() error, error) {
	before, blocked := a.Meter.Traffic(), a.blocked
	defer func() {
		a.eval = a.eval.Add(a.Meter.Traffic().Sub(before))
		a.blocked = blocked
	}()
	var saved *tensor.Tensor
	var bns []*nn.BatchNorm2d
	var bnSaved []*tensor.Tensor
	restore := func() error {
		if saved != nil {
			part := f.Flat.Slice(0, 0, f.ParamElements())
			part.CopyFrom(saved)
			part.Release()
			f.ScatterParams()
			saved.Release()
			saved = nil
		}
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
	if what.Params {
		f.GatherParams()
		part := f.Flat.Slice(0, 0, f.ParamElements())
		saved = part.Clone()
		err := a.Collective("average for evaluation", func(ctx context.Context) error {
			return a.Meter.AllReduce(ctx, part, dist.Avg)
		})
		part.Release()
		f.ScatterParams()
		if err != nil {
			restore()
			return nil, err
		}
	}
	if !what.BN && what.BNBatches == 0 {
		return restore, nil
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
	if what.BNBatches > 0 {
		if err := ReestimateBN(s, bns, what.BNBatches); err != nil {
			restore()
			return nil, err
		}
	}
	if what.BN {
		if err := a.averageBN(bns); err != nil {
			restore()
			return nil, err
		}
	}
	return restore, nil
}

// averageBN replaces the running means and variances of bns by their
// averages over the workers.
func (a *CommAccount) averageBN(bns []*nn.BatchNorm2d) error {
	n := 0
	for _, bn := range bns {
		n += 2 * bn.Features
	}
	flat := tensor.Zeros(tensor.Shape{n}, tensor.Of(bns[0].RunningMean.DType()), tensor.On(dist.DeviceOf(a.Meter)))
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
	if err := a.Collective("average batch-norm statistics", func(ctx context.Context) error {
		return a.Meter.AllReduce(ctx, flat, dist.Avg)
	}); err != nil {
		return err
	}
	parts(func(part, t *tensor.Tensor) { t.CopyFrom(part) })
	return nil
}

// ReestimateBN recomputes the running statistics of bns as the cumulative
// average (PyTorch's momentum=None) over n training micro-batches of s's
// worker, forward passes in training mode without gradients, as
// torch.optim.swa_utils.update_bn does. The rest of the model is unchanged.
func ReestimateBN(s *StepContext, bns []*nn.BatchNorm2d, n int) error {
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

// State returns the account for a checkpoint's strategy scalars.
func (a *CommAccount) State() map[string]string {
	tr := a.base.Add(a.Meter.Traffic())
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	sc := map[string]string{
		"syncs":        i64(a.syncs),
		"dp_bytes":     i64(a.dpBytes),
		"consensus":    strconv.FormatFloat(a.consensus, 'g', -1, 64),
		"blocked_ns":   i64(int64(a.blocked)),
		"traffic.sent": i64(tr.Sent),
		"traffic.recv": i64(tr.Received),
		"traffic.ops":  i64(tr.Ops),
		"setup.sent":   i64(a.setup.Sent),
		"setup.recv":   i64(a.setup.Received),
		"setup.ops":    i64(a.setup.Ops),
		"eval.sent":    i64(a.eval.Sent),
		"eval.recv":    i64(a.eval.Received),
		"eval.ops":     i64(a.eval.Ops),
		"pending":      EncodePendingSync(a.pending),
	}
	if node := a.nodeTraffic(); a.node != nil || a.nodeSyncs > 0 {
		sc["node.sent"], sc["node.recv"], sc["node.ops"] = i64(node.Sent), i64(node.Received), i64(node.Ops)
		sc["node.syncs"], sc["node.blocked_ns"] = i64(a.nodeSyncs), i64(int64(a.nodeBlocked))
	}
	return sc
}

// LoadState restores what State saved, before the strategy's Setup.
func (a *CommAccount) LoadState(sc map[string]string) error {
	var err error
	geti := func(k string) int64 {
		v, e := strconv.ParseInt(sc[k], 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%s %q: %w", k, sc[k], e)
		}
		return v
	}
	syncs, dpBytes, blocked := geti("syncs"), geti("dp_bytes"), geti("blocked_ns")
	base := dist.Traffic{Sent: geti("traffic.sent"), Received: geti("traffic.recv"), Ops: geti("traffic.ops")}
	setup := dist.Traffic{Sent: geti("setup.sent"), Received: geti("setup.recv"), Ops: geti("setup.ops")}
	eval := dist.Traffic{Sent: geti("eval.sent"), Received: geti("eval.recv"), Ops: geti("eval.ops")}
	consensus, e := strconv.ParseFloat(sc["consensus"], 64)
	if err = errors.Join(err, e); err != nil {
		return fmt.Errorf("%s: state: %w", a.who, err)
	}
	if syncs < 0 {
		return fmt.Errorf("%s: state: %d synchronizations", a.who, syncs)
	}
	pending, err := DecodePendingSync(sc["pending"])
	if err != nil {
		return fmt.Errorf("%s: state: %w", a.who, err)
	}
	if _, ok := sc["node.syncs"]; ok {
		nodeBase := dist.Traffic{Sent: geti("node.sent"), Received: geti("node.recv"), Ops: geti("node.ops")}
		nodeSyncs, nodeBlocked := geti("node.syncs"), geti("node.blocked_ns")
		if err != nil {
			return fmt.Errorf("%s: state: %w", a.who, err)
		}
		a.nodeBase, a.nodeSyncs, a.nodeBlocked = nodeBase, nodeSyncs, time.Duration(nodeBlocked)
	}
	a.syncs, a.dpBytes, a.blocked, a.consensus, a.pending = syncs, dpBytes, time.Duration(blocked), consensus, pending
	a.base, a.setup, a.eval, a.loaded = base, setup, eval, true
	return nil
}
