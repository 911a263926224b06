package gossip

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// DmSGDOptions configure DmSGD.
type DmSGDOptions struct {
	// Topology gives the mixing matrices W(k); it has a node per rank of
	// the Comm (required).
	Topology Topology
	// LocalSteps is J: the workers mix after every J-th step and take the
	// steps in between alone. 0 means 1, mixing at every step.
	LocalSteps int
	// Context bounds every communication; nil means context.Background.
	// Without a deadline each collective is bounded by
	// dist.DefaultTimeout.
	Context context.Context
	// Optimizer names the optimizer ("SGD", "AdamW", "LARS") in String
	// before Setup, which learns it from the optimizer itself (empty:
	// SGD).
	Optimizer string
}

// DmSGD is decentralized momentum SGD in its adapt-then-combine form
// (Yuan, Chen, Huang, Zhang, Pan, Xu and Yin, 2021,
// "DecentLaM", and Ying et al., 2021, who train with it over exponential
// graphs): at iteration k worker i takes
//
//	m_i ← β m_i + g_i
//	x_i ← Σ_j w_ij(k) (x_j − γ m_j)
//
// The Trainer's optimizer — SGD with momentum β and rate γ — takes the
// local step x_i − γ m_i (with Nesterov momentum, its Nesterov variant);
// AfterStep then replaces each worker's parameters by their average with
// its in-neighbours', weighted by row i of W(k) (dist.NeighborAllReduce
// over the parameters laid end to end in one buffer where the Comm takes
// its operands, train.FlatParams: host memory for TCP and shared memory,
// the GPU for NCCL). Momentum, any other optimizer state and batch norm's
// running statistics stay local. k counts the mixings, so a time-varying topology
// (the one-peer exponential graph) steps through its matrices whatever J
// is. With W = 11ᵀ/n (Full) the parameters all become their average x̄ −
// γ·mean_j m_j after every step, and since the momenta's mean follows
// SGD's recursion on the mean gradient, DmSGD is then data-parallel
// momentum SGD.
//
// Every mixing also all-reduces a small probe — about 8192 sampled
// parameters (32 KiB in float32), the previous mixing's consensus
// distance and whether a worker was interrupted — to measure the
// consensus distance mean_i ‖x_i − x̄‖/‖x̄‖ of the parameters as they
// enter the mixing (train.ConsensusSample, the measure every strategy
// reports), and to stop the workers together. It is the only
// global collective of training, an extra synchronization that pure
// gossip would not have; its bytes are counted with the rest. A mixing's
// distance is averaged over the workers by the next mixing's probe (the
// run's last by a one-element all-reduce), and its train.KindSync record
// (H = J) is emitted then. Models of at most 8192 parameters are measured
// exactly, larger ones on a sample stratified by tensor, within a few
// percent (6% on an MLP of 83,460 parameters). Every collective is bounded
// by dist.DefaultTimeout when Options.Context has no deadline, and the
// time a mixing or the last mean waits counts as blocked.
type DmSGD struct {
	*train.CommAccount
	topo Topology
	j    int

	optName   string
	gradBytes int64
	// fp holds the parameters end to end in one buffer on the Comm's
	// device, which a mixing averages in place.
	fp *train.FlatParams
	// sample is where the consensus distance is measured; probe
	// ([m+2]) carries the sampled values, the previous distance and the
	// interruption flag through the all-reduce.
	sample *train.ConsensusSample
	probe  *tensor.Tensor
}

var (
	_ train.Strategy          = (*DmSGD)(nil)
	_ train.Stateful          = (*DmSGD)(nil)
	_ train.CommReporter      = (*DmSGD)(nil)
	_ train.EvalPreparer      = (*DmSGD)(nil)
	_ train.StopCoordinator   = (*DmSGD)(nil)
	_ train.WorkerCheckpoints = (*DmSGD)(nil)
	_ fmt.Stringer            = (*DmSGD)(nil)
)

// mixTag tags the messages of a mixing.
const mixTag = 0x676f73 // "gos"

// NewDmSGD returns DmSGD over c with the topology of opt.
func NewDmSGD(c dist.Comm, opt DmSGDOptions) (*DmSGD, error) {
	if c == nil {
		return nil, errors.New("dmsgd: nil Comm")
	}
	if opt.Topology == nil {
		return nil, errors.New("dmsgd: no topology")
	}
	if n := opt.Topology.Nodes(); n != c.Size() {
		return nil, fmt.Errorf("dmsgd: topology of %d nodes for %d workers", n, c.Size())
	}
	if opt.LocalSteps < 0 {
		return nil, fmt.Errorf("dmsgd: %d local steps, want ≥ 0", opt.LocalSteps)
	}
	return &DmSGD{CommAccount: train.NewCommAccount(c, opt.Context, "dmsgd"), topo: opt.Topology, j: max(opt.LocalSteps, 1), optName: opt.Optimizer}, nil
}

// String names the strategy: "DmSGD over the static exponential graph, 8
// nodes, τ = 3", with the optimizer's name for another than SGD and the
// mixing period when J > 1.
func (d *DmSGD) String() string {
	name := "DmSGD"
	if d.optName != "" && d.optName != "SGD" {
		name = "decentralized " + d.optName
	}
	s := name + " over the " + d.topo.String()
	if d.j > 1 {
		s += fmt.Sprintf(", mixing every %d steps", d.j)
	}
	return s
}

// Topology returns the topology the workers mix over.
func (d *DmSGD) Topology() Topology { return d.topo }

// Mixings returns the number of mixings done so far in the run.
func (d *DmSGD) Mixings() int { return int(d.Syncs()) }

// Setup implements train.Strategy: on a fresh run it copies rank 0's
// parameters and buffers to the other workers (on a resumed one it checks
// that they hold the same model), and lays the parameters out in the flat
// buffer.
func (d *DmSGD) Setup(s *train.StepContext) error {
	if d.fp != nil {
		return errors.New("dmsgd: Setup called twice")
	}
	d.optName = optim.Name(s.Optimizer)
	params, gradBytes, err := train.Trainable(s.Params)
	if err != nil {
		return fmt.Errorf("dmsgd: %w", err)
	}
	d.gradBytes = gradBytes
	if err := d.StartModel(s, !d.Loaded()); err != nil {
		return err
	}
	if d.fp, err = train.NewFlatParams(d.Comm(), params, nil, 0); err != nil {
		return fmt.Errorf("dmsgd: %w", err)
	}
	d.sample = train.NewConsensusSample(d.fp.Sizes(), train.ConsensusSampleSize, d.fp.Flat.Device())
	d.probe = tensor.Zeros(tensor.Shape{d.sample.Len() + 2}, tensor.On(dist.DeviceOf(d.Comm())))
	return nil
}

// AfterBackward implements train.Strategy; the gradients stay local.
func (d *DmSGD) AfterBackward(*train.StepContext) error { return nil }

// AfterStep implements train.Strategy: after every J-th step it mixes the
// parameters with the neighbours of W(k), k the number of mixings so far.
func (d *DmSGD) AfterStep(s *train.StepContext) error {
	if d.fp == nil {
		return errors.New("dmsgd: AfterStep before Setup")
	}
	d.Stepped(d.gradBytes)
	if (s.Step+1)%d.j == 0 {
		if err := d.mix(s); err != nil {
			return fmt.Errorf("dmsgd: mixing %d at step %d: %w", d.Mixings(), s.Step+1, err)
		}
	}
	if s.Step+1 == s.TotalSteps {
		return d.FlushConsensus(s)
	}
	return nil
}

// mix runs one mixing: the probe's all-reduce, then the neighbour average
// of the parameters.
func (d *DmSGD) mix(s *train.StepContext) error {
	defer d.Block(time.Now())
	d.fp.Gather()
	flat := d.fp.Flat
	m := d.sample.Len()
	sel := tensor.IndexSelect(flat, 0, d.sample.Index)
	mine := sel.Float64s()
	head := d.probe.Slice(0, 0, m)
	head.CopyFrom(sel)
	head.Release()
	sel.Release()
	slots := d.probe.Slice(0, m, m+2)
	d.ConsensusSlotsTensor(s, slots)
	slots.Release()
	if err := d.Collective("consensus probe", func(ctx context.Context) error {
		return d.Meter.AllReduce(ctx, d.probe, dist.Avg)
	}); err != nil {
		return err
	}
	got := d.probe.Float64s()

	k := d.Mixings()
	rank := d.Meter.Rank()
	self, inN := d.topo.In(k, rank)
	_, outN := d.topo.Out(k, rank)
	in := make([]dist.Peer, len(inN))
	for i, l := range inN {
		in[i] = dist.Peer{Rank: l.Node, Weight: l.Weight}
	}
	out := make([]int, len(outN))
	for i, l := range outN {
		out[i] = l.Node
	}
	if err := d.Collective("neighbour average", func(ctx context.Context) error {
		return dist.NeighborAllReduce(ctx, d.Meter, flat, self, in, out, mixTag)
	}); err != nil {
		return err
	}
	d.fp.Scatter()
	d.Synced()

	d.TakeSlots(s, [2]float64{got[m], got[m+1]})
	d.Pend(&train.PendingSync{Step: s.Step + 1, Epoch: s.Epoch + 1, H: d.j, LR: s.LR, Dist: d.sample.Distance(mine, got[:m])})
	return nil
}

// CheckpointsPerWorker implements train.WorkerCheckpoints: each worker's
// model is its own between mixings.
func (d *DmSGD) CheckpointsPerWorker() {}

// CoordinatesStop implements train.StopCoordinator: an interrupted worker
// says so in the next mixing's probe, and every worker stops right after
// that mixing, at the same step.
func (d *DmSGD) CoordinatesStop() {}

// State implements train.Stateful: the accounting (whose count of
// synchronizations is the number of mixings, which picks W(k) of a
// time-varying topology) and the pending consensus distance.
func (d *DmSGD) State() (map[string]*tensor.Tensor, map[string]string) {
	sc := d.CommAccount.State()
	sc["kind"] = "dmsgd"
	sc["topology"] = d.topo.String()
	sc["local_steps"] = strconv.Itoa(d.j)
	sc["mixings"] = sc["syncs"]
	return map[string]*tensor.Tensor{}, sc
}

// LoadState implements train.Stateful. It runs before Setup, and checks
// that the checkpoint was written by DmSGD over the same topology and J.
func (d *DmSGD) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	if len(ts) > 0 {
		return errors.New("dmsgd: unexpected tensors in the strategy's state")
	}
	if sc["kind"] != "dmsgd" {
		return fmt.Errorf("dmsgd: the checkpoint's strategy is %q", sc["kind"])
	}
	if sc["topology"] != d.topo.String() || sc["local_steps"] != strconv.Itoa(d.j) {
		return fmt.Errorf("dmsgd: the checkpoint mixed over the %s every %s steps, this run over the %s every %d",
			sc["topology"], sc["local_steps"], d.topo.String(), d.j)
	}
	if sc["syncs"] == "" {
		// Written before the accounting was shared: the mixings are its
		// synchronizations.
		sc = maps.Clone(sc)
		sc["syncs"] = sc["mixings"]
	}
	if sc["syncs"] != sc["mixings"] {
		return fmt.Errorf("dmsgd: state: %s mixings but %s synchronizations", sc["mixings"], sc["syncs"])
	}
	return d.CommAccount.LoadState(sc)
}

// BeforeEval implements train.EvalPreparer: the workers' average is
// evaluated. It saves each worker's parameters, all-reduces them into
// their mean, and returns the function that puts them back, so that
// evaluating never changes the run; the all-reduce's bytes count as
// evaluation traffic. Batch norm's running statistics are each worker's.
func (d *DmSGD) BeforeEval(s *train.StepContext) (func() error, error) {
	restore, err := d.AverageForEval(s, d.fp, train.EvalAverage{Params: true})
	if err != nil {
		return nil, fmt.Errorf("dmsgd: %w", err)
	}
	return restore, nil
}

// Close frees the strategy's buffers; the Comm stays open, owned by the
// caller.
func (d *DmSGD) Close() {
	if d.fp != nil {
		d.fp.Release()
		d.fp = nil
	}
	if d.sample != nil {
		d.sample.Release()
		d.sample = nil
	}
	if d.probe != nil {
		d.probe.Release()
		d.probe = nil
	}
}
