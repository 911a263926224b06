package gossip

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/flockml/flock/backend/cpu"
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
	// Without a deadline each transport applies its own timeout.
	Context context.Context
}

// DmSGD is decentralized momentum SGD in its adapt-then-combine form
// (strategies.md §4; Yuan, Chen, Huang, Zhang, Pan, Xu and Yin, 2021,
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
// over the parameters laid end to end in one host buffer). Momentum, any other optimizer state and batch norm's running
// statistics stay local. k counts the mixings, so a time-varying topology
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
// enter the mixing, and to stop the workers together. It is the only
// global collective of training, an extra synchronization that pure
// gossip would not have; its bytes are counted with the rest. A mixing's
// distance is averaged over the workers by the next mixing's probe (the
// run's last by a one-element all-reduce), and its train.KindSync record
// (H = J) is emitted then. Models of at most 8192 parameters are measured
// exactly, larger ones on a sample stratified by tensor, within a few
// percent (6% on an MLP of 83,460 parameters).
type DmSGD struct {
	comm  dist.Comm
	meter *dist.Meter
	ctx   context.Context
	topo  Topology
	j     int

	optName   string
	gradBytes int64
	// The parameters, end to end in one host buffer that a mixing
	// averages in place.
	flatModel

	// index holds the positions in flat of the sampled parameters
	// (Int64, [m]) and weight the weight of each in the sums of squares;
	// probe ([m+2], Float32) carries them, the previous distance and the
	// interruption flag through the all-reduce.
	index  *tensor.Tensor
	weight []float64
	probe  *tensor.Tensor

	mixings int // mixings done over the whole run: the next mixing uses W(mixings)
	pending *train.PendingSync
	loaded  bool

	// Accounting, checkpointed so that a resumed run's counts go on.
	setup, base dist.Traffic // base: traffic before a resume
	eval        dist.Traffic // of evaluations' averaging
	blocked     time.Duration
	dpBytes     int64
	consensus   float64
}

var (
	_ train.Strategy        = (*DmSGD)(nil)
	_ train.Stateful        = (*DmSGD)(nil)
	_ train.CommReporter    = (*DmSGD)(nil)
	_ train.EvalPreparer    = (*DmSGD)(nil)
	_ train.StopCoordinator = (*DmSGD)(nil)
	_ fmt.Stringer          = (*DmSGD)(nil)
)

// mixTag tags the messages of a mixing.
const mixTag = 0x676f73 // "gos"

// A mixing's probe samples about consensusSample parameters, at least
// sampleFloor of each tensor (see samplePositions).
const (
	consensusSample = 1 << 13
	sampleFloor     = 64
)

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
	ctx := opt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return &DmSGD{comm: c, meter: dist.NewMeter(c), ctx: ctx, topo: opt.Topology, j: max(opt.LocalSteps, 1)}, nil
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
func (d *DmSGD) Mixings() int { return d.mixings }

// Setup implements train.Strategy: on a fresh run it copies rank 0's
// parameters and buffers to the other workers (on a resumed one it checks
// that they hold the same model), and lays the parameters out in the flat
// buffer.
func (d *DmSGD) Setup(s *train.StepContext) error {
	if d.flat != nil {
		return errors.New("dmsgd: Setup called twice")
	}
	d.optName = optim.Name(s.Optimizer)
	var err error
	if d.gradBytes, err = d.collect(s.Params, "dmsgd"); err != nil {
		return err
	}
	before := d.meter.Traffic()
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	if d.loaded {
		err = train.CheckSameModel(ctx, d.meter, s)
	} else {
		err = train.BroadcastModel(ctx, d.meter, s)
	}
	if err != nil {
		return fmt.Errorf("dmsgd: setup: %w", err)
	}
	d.setup = d.setup.Add(d.meter.Traffic().Sub(before))
	return d.layout()
}

// layout allocates flat and its views and chooses the sampled positions.
func (d *DmSGD) layout() error {
	sizes, err := d.flatModel.layout(d.meter, "dmsgd")
	if err != nil {
		return err
	}
	idx, w := samplePositions(sizes, consensusSample)
	d.index = tensor.FromSlice(idx, tensor.Shape{len(idx)}, tensor.On(d.flat.Device()))
	d.weight = w
	d.probe = tensor.Zeros(tensor.Shape{len(idx) + 2}, tensor.On(dist.DeviceOf(d.meter)))
	return nil
}

// samplePositions returns the positions, in the parameters laid end to
// end, at which the consensus distance is measured, with the weight of
// each in the sums of squares: every position when there are at most m.
// Otherwise the sample is stratified by tensor, as distances differ far
// more between layers than within one: a tensor of at most sampleFloor
// elements (a bias, a normalisation's scale) is read whole, a larger one
// gets sampleFloor positions plus its share, in proportion to its size, of
// what is left of m; a tensor's positions are evenly spread through it
// and weighted by its size over their count. A model of more than
// m/sampleFloor tensors gets more than m positions.
func samplePositions(sizes []int, m int) ([]int64, []float64) {
	total := 0
	for _, s := range sizes {
		total += s
	}
	counts := slices.Clone(sizes)
	if total > m {
		left, rest := m, 0
		for i, s := range sizes {
			counts[i] = min(s, sampleFloor)
			left -= counts[i]
			rest += s - counts[i]
		}
		for i, s := range sizes {
			if left > 0 && rest > 0 {
				counts[i] += int(math.Round(float64(left) * float64(s-counts[i]) / float64(rest)))
			}
		}
	}
	var idx []int64
	var w []float64
	off := 0
	for i, s := range sizes {
		k := counts[i]
		for j := range k {
			idx = append(idx, int64(off+int((int64(2*j+1)*int64(s))/int64(2*k))))
			w = append(w, float64(s)/float64(k))
		}
		off += s
	}
	return idx, w
}

// AfterBackward implements train.Strategy; the gradients stay local.
func (d *DmSGD) AfterBackward(*train.StepContext) error { return nil }

// AfterStep implements train.Strategy: after every J-th step it mixes the
// parameters with the neighbours of W(k), k the number of mixings so far.
func (d *DmSGD) AfterStep(s *train.StepContext) error {
	if d.flat == nil {
		return errors.New("dmsgd: AfterStep before Setup")
	}
	d.dpBytes += dist.AllReduceBytes(d.gradBytes, d.comm.Size())
	if (s.Step+1)%d.j == 0 {
		if err := d.mix(s); err != nil {
			return fmt.Errorf("dmsgd: mixing %d at step %d: %w", d.mixings, s.Step+1, err)
		}
	}
	if s.Step+1 == s.TotalSteps {
		return d.flushConsensus(s)
	}
	return nil
}

// mix runs one mixing: the probe's all-reduce, then the neighbour average
// of the parameters.
func (d *DmSGD) mix(s *train.StepContext) error {
	start := time.Now()
	defer func() { d.blocked += time.Since(start) }()
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	d.gather()
	m := d.index.NumElements()
	sel := tensor.IndexSelect(d.flat, 0, d.index)
	mine := sel.Float64s()
	head := d.probe.Slice(0, 0, m)
	head.CopyFrom(sel)
	head.Release()
	sel.Release()
	var prev, stop float64
	if d.pending != nil {
		prev = d.pending.Dist
	}
	if s.Interrupted() {
		stop = 1
	}
	slots := d.probe.Slice(0, m, m+2)
	v := tensor.FromSlice([]float64{prev, stop}, tensor.Shape{2}, tensor.On(cpu.Default()))
	slots.CopyFrom(v)
	v.Release()
	slots.Release()
	if err := d.meter.AllReduce(ctx, d.probe, dist.Avg); err != nil {
		return fmt.Errorf("consensus probe: %w", err)
	}
	got := d.probe.Float64s()

	rank := d.comm.Rank()
	self, inN := d.topo.In(d.mixings, rank)
	_, outN := d.topo.Out(d.mixings, rank)
	in := make([]dist.Peer, len(inN))
	for i, l := range inN {
		in[i] = dist.Peer{Rank: l.Node, Weight: l.Weight}
	}
	out := make([]int, len(outN))
	for i, l := range outN {
		out[i] = l.Node
	}
	if err := dist.NeighborAllReduce(ctx, d.meter, d.flat, self, in, out, mixTag); err != nil {
		return err
	}
	d.scatter()
	d.mixings++

	d.receiveConsensus(s, got[m])
	d.pending = &train.PendingSync{Step: s.Step + 1, Epoch: s.Epoch + 1, H: d.j, LR: s.LR, Dist: distance(mine, got[:m], d.weight)}
	if got[m+1] > 0 {
		s.Stop()
	}
	return nil
}

// distance returns ‖x − x̄‖/‖x̄‖ over the sampled positions, each square
// weighted by w.
func distance(x, bar, w []float64) float64 {
	var d2, n2 float64
	for i, v := range x {
		e := v - bar[i]
		d2 += w[i] * e * e
		n2 += w[i] * bar[i] * bar[i]
	}
	if n2 == 0 {
		return 0
	}
	return math.Sqrt(d2 / n2)
}

// receiveConsensus records the workers' mean distance of the pending
// mixing and emits its record.
func (d *DmSGD) receiveConsensus(s *train.StepContext, mean float64) {
	if d.pending == nil {
		return
	}
	p := d.pending
	d.pending = nil
	d.consensus = mean
	p.Emit(s, d.stats())
}

// flushConsensus averages the pending distance on its own, at the end of
// the run.
func (d *DmSGD) flushConsensus(s *train.StepContext) error {
	if d.pending == nil {
		return nil
	}
	start := time.Now()
	defer func() { d.blocked += time.Since(start) }()
	mean, err := dist.Mean(d.ctx, d.meter, d.pending.Dist)
	if err != nil {
		return fmt.Errorf("dmsgd: consensus distance of the last mixing: %w", err)
	}
	d.receiveConsensus(s, mean)
	return nil
}

// CoordinatesStop implements train.StopCoordinator: an interrupted worker
// says so in the next mixing's probe, and every worker stops right after
// that mixing, at the same step.
func (d *DmSGD) CoordinatesStop() {}

// stats returns the accounting so far.
func (d *DmSGD) stats() train.CommStats {
	tr := d.base.Add(d.meter.Traffic()).Sub(d.setup).Sub(d.eval)
	return train.CommStats{
		Sent: tr.Sent, Received: tr.Received, Collectives: tr.Ops,
		Blocked: d.blocked.Seconds(), Syncs: int64(d.mixings),
		SetupBytes:        d.setup.Sent + d.setup.Received,
		EvalBytes:         d.eval.Sent + d.eval.Received,
		DataParallelBytes: d.dpBytes,
		Consensus:         d.consensus,
	}
}

// CommStats implements train.CommReporter. Sent and Received count the
// neighbour messages (the parameters' bytes once per out- and
// in-neighbour of each mixing) and the probes' all-reduces; Collectives
// counts each message and each all-reduce; Syncs the mixings.
func (d *DmSGD) CommStats() train.CommStats { return d.stats() }

// State implements train.Stateful: the number of mixings, which picks
// W(k) of a time-varying topology, the pending consensus distance and the
// accounting.
func (d *DmSGD) State() (map[string]*tensor.Tensor, map[string]string) {
	tr := d.base.Add(d.meter.Traffic())
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	pending := train.EncodePendingSync(d.pending)
	return map[string]*tensor.Tensor{}, map[string]string{
		"kind":         "dmsgd",
		"topology":     d.topo.String(),
		"local_steps":  strconv.Itoa(d.j),
		"mixings":      strconv.Itoa(d.mixings),
		"pending":      pending,
		"dp_bytes":     i64(d.dpBytes),
		"consensus":    strconv.FormatFloat(d.consensus, 'g', -1, 64),
		"blocked_ns":   i64(int64(d.blocked)),
		"traffic.sent": i64(tr.Sent),
		"traffic.recv": i64(tr.Received),
		"traffic.ops":  i64(tr.Ops),
		"setup.sent":   i64(d.setup.Sent),
		"setup.recv":   i64(d.setup.Received),
		"setup.ops":    i64(d.setup.Ops),
		"eval.sent":    i64(d.eval.Sent),
		"eval.recv":    i64(d.eval.Received),
		"eval.ops":     i64(d.eval.Ops),
	}
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
	var err error
	geti := func(k string) int64 {
		v, e := strconv.ParseInt(sc[k], 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("dmsgd: state %s %q: %w", k, sc[k], e)
		}
		return v
	}
	mixings, dpBytes, blocked := geti("mixings"), geti("dp_bytes"), geti("blocked_ns")
	base := dist.Traffic{Sent: geti("traffic.sent"), Received: geti("traffic.recv"), Ops: geti("traffic.ops")}
	setup := dist.Traffic{Sent: geti("setup.sent"), Received: geti("setup.recv"), Ops: geti("setup.ops")}
	eval := dist.Traffic{Sent: geti("eval.sent"), Received: geti("eval.recv"), Ops: geti("eval.ops")}
	consensus, e := strconv.ParseFloat(sc["consensus"], 64)
	if err = errors.Join(err, e); err != nil {
		return fmt.Errorf("dmsgd: state: %w", err)
	}
	if mixings < 0 {
		return fmt.Errorf("dmsgd: state: %d mixings", mixings)
	}
	pending, err := train.DecodePendingSync(sc["pending"])
	if err != nil {
		return fmt.Errorf("dmsgd: state: %w", err)
	}
	d.mixings, d.pending, d.loaded = int(mixings), pending, true
	d.dpBytes, d.blocked, d.consensus = dpBytes, time.Duration(blocked), consensus
	d.base, d.setup, d.eval = base, setup, eval
	return nil
}

// BeforeEval implements train.EvalPreparer: the workers' average is
// evaluated. It saves each worker's parameters, all-reduces them into
// their mean, and returns the function that puts them back, so that
// evaluating never changes the run; the all-reduce's bytes count as
// evaluation traffic. Batch norm's running statistics are each worker's.
func (d *DmSGD) BeforeEval(*train.StepContext) (func() error, error) {
	before, blocked := d.meter.Traffic(), d.blocked
	defer func() {
		d.eval = d.eval.Add(d.meter.Traffic().Sub(before))
		d.blocked = blocked
	}()
	d.gather()
	saved := d.flat.Clone()
	restore := func() error {
		d.flat.CopyFrom(saved)
		saved.Release()
		d.scatter()
		return nil
	}
	ctx, cancel := dist.WithDefaultTimeout(d.ctx, dist.DefaultTimeout)
	defer cancel()
	if err := d.meter.AllReduce(ctx, d.flat, dist.Avg); err != nil {
		restore()
		return nil, fmt.Errorf("dmsgd: average for evaluation: %w", err)
	}
	d.scatter()
	return restore, nil
}

// Close frees the strategy's buffers; the Comm stays open, owned by the
// caller.
func (d *DmSGD) Close() {
	d.release()
	for _, t := range []*tensor.Tensor{d.index, d.probe} {
		if t != nil {
			t.Release()
		}
	}
	d.index, d.probe = nil, nil
}
