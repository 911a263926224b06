package localopt

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// OuterOptions set DiLoCo's outer optimizer, SGD with momentum.
type OuterOptions struct {
	// LR is the outer learning rate (DiLoCo's 0.7).
	LR float64
	// Momentum μ (0.9) and Nesterov (true) as in torch.optim.SGD.
	Momentum float64
	Nesterov bool
}

// DefaultOuter returns the outer optimizer of Douillard et al. (2023):
// SGD with lr 0.7 and Nesterov momentum 0.9.
func DefaultOuter() OuterOptions { return OuterOptions{LR: 0.7, Momentum: 0.9, Nesterov: true} }

// DiLoCo is Distributed Low-Communication training (Douillard et al.,
// 2023). Each round every worker starts from the global parameters
// θ_prev, takes H inner steps with its own optimizer (whose state it
// keeps), and then the pseudo-gradient
//
//	Δ = (1/K) Σ_k (θ_prev − θ_k)
//
// is all-reduced and the outer optimizer — SGD with momentum, as
// torch.optim.SGD computes it — steps θ_prev with Δ as its gradient:
//
//	b ← μ·b + Δ (b ← Δ at the first outer step);  d = Δ + μ·b (Nesterov) or b
//	θ_prev ← θ_prev − η_outer·d
//
// after which every worker continues from the new θ_prev (bit-identical
// on all of them). With η_outer = 1 and μ = 0 the outer step is θ_prev − Δ =
// the workers' average: Local SGD. H comes from any SyncSchedule, so
// DiLoCo composes with QSR. θ_prev and the outer momentum are checkpointed.
type DiLoCo struct {
	core
	outer    OuterOptions
	prev     *tensor.Tensor // θ_prev, flat on the host
	mom      *tensor.Tensor // the outer momentum buffer b
	delta    *tensor.Tensor // Δ, kept while the consensus is measured
	hasMom   bool
	loadPrev *tensor.Tensor
	loadMom  *tensor.Tensor
}

var (
	_ train.Strategy     = (*DiLoCo)(nil)
	_ train.Stateful     = (*DiLoCo)(nil)
	_ train.EvalPreparer = (*DiLoCo)(nil)
	_ train.CommReporter = (*DiLoCo)(nil)
)

// NewDiLoCo returns DiLoCo over c with the given outer optimizer.
// Options.AverageState is refused: inner optimizer state stays per worker.
func NewDiLoCo(c dist.Comm, opt Options, outer OuterOptions) (*DiLoCo, error) {
	if len(opt.AverageState) > 0 {
		return nil, errors.New("diloco: inner optimizer state stays with each worker (AverageState is for Local)")
	}
	if !(outer.LR > 0) || !(outer.Momentum >= 0 && outer.Momentum < 1) || outer.Nesterov && outer.Momentum == 0 {
		return nil, fmt.Errorf("diloco: outer lr %v, momentum %v, Nesterov %v: want lr > 0, 0 ≤ momentum < 1, Nesterov only with momentum",
			outer.LR, outer.Momentum, outer.Nesterov)
	}
	co, err := newCore(c, opt, "diloco")
	if err != nil {
		return nil, err
	}
	return &DiLoCo{core: co, outer: outer}, nil
}

// String names the strategy: "DiLoCo, inner AdamW (QSR …), outer SGD lr 0.7 …".
func (d *DiLoCo) String() string {
	o := fmt.Sprintf("outer SGD lr %g", d.outer.LR)
	if d.outer.Momentum > 0 {
		o += fmt.Sprintf(" momentum %g", d.outer.Momentum)
		if d.outer.Nesterov {
			o += " Nesterov"
		}
	}
	return fmt.Sprintf("DiLoCo, inner %s, %s", d.describe(), o)
}

// Setup implements train.Strategy.
func (d *DiLoCo) Setup(s *train.StepContext) error {
	if err := d.begin(s); err != nil {
		return err
	}
	if err := d.layout(); err != nil {
		return err
	}
	d.delta = tensor.ZerosLike(d.flat)
	d.mom = tensor.ZerosLike(d.flat)
	d.prev = tensor.ZerosLike(d.flat)
	if d.loadPrev != nil {
		if d.loadPrev.NumElements() != d.prev.NumElements() || d.loadMom.NumElements() != d.mom.NumElements() {
			return fmt.Errorf("diloco: the checkpoint's θ_prev has %d elements, this model's parameters %d", d.loadPrev.NumElements(), d.prev.NumElements())
		}
		d.prev.CopyFrom(d.loadPrev.View(d.prev.NumElements()))
		d.mom.CopyFrom(d.loadMom.View(d.mom.NumElements()))
		d.loadPrev.Release()
		d.loadMom.Release()
		d.loadPrev, d.loadMom = nil, nil
		return d.setupStream()
	}
	d.fp.Gather()
	d.prev.CopyFrom(d.flat)
	return d.setupStream()
}

// AfterBackward implements train.Strategy.
func (d *DiLoCo) AfterBackward(*train.StepContext) error { return nil }

// AfterStep implements train.Strategy: at the end of a round it averages
// the pseudo-gradients and takes the outer step.
func (d *DiLoCo) AfterStep(s *train.StepContext) error {
	if d.stream != nil {
		return d.streamStep(s)
	}
	done, err := d.step(s)
	if err != nil {
		return err
	}
	if !done {
		if d.innerDue(s) {
			if err := d.innerSync(); err != nil {
				return fmt.Errorf("diloco: node synchronization at step %d: %w", s.Step+1, err)
			}
		}
		return nil
	}
	cd, err := d.outerStep(s)
	if err == nil {
		err = d.endRound(s, cd)
	}
	if err != nil {
		return fmt.Errorf("diloco: synchronization at step %d: %w", s.Step+1, err)
	}
	return nil
}

// outerStep averages the pseudo-gradients, steps θ_prev and puts it in the
// parameters; it returns this worker's consensus distance.
func (d *DiLoCo) outerStep(s *train.StepContext) (float64, error) {
	defer d.Block(time.Now())
	d.fp.Gather()
	d.mine = d.sample.Read(d.flat)
	d.flat.MulScalarInPlace(-1)
	d.flat.AddInPlace(d.prev)
	d.ConsensusSlotsTensor(s, d.slots)
	if err := d.Collective("all-reduce", d.mean); err != nil {
		return 0, err
	}
	d.TakeSlotsTensor(s, d.slots)
	d.slots.Fill(0)
	// The consensus distance compares θ_k with θ̄ = θ_prev − Δ.
	d.delta.CopyFrom(d.flat)
	d.flat.MulScalarInPlace(-1)
	d.flat.AddInPlace(d.prev)
	cd := d.sample.Distance(d.mine, d.sample.Read(d.flat))
	step := d.delta
	if mu := d.outer.Momentum; mu > 0 {
		if !d.hasMom {
			d.mom.CopyFrom(d.delta)
			d.hasMom = true
		} else {
			d.mom.MulScalarInPlace(mu)
			d.mom.AddInPlace(d.delta)
		}
		if d.outer.Nesterov {
			d.delta.AddScaledInPlace(mu, d.mom)
		} else {
			step = d.mom
		}
	}
	d.prev.AddScaledInPlace(-d.outer.LR, step)
	d.flat.CopyFrom(d.prev)
	d.fp.Scatter()
	return cd, nil
}

// State implements train.Stateful: θ_prev, the outer momentum, the round
// and the accounting.
func (d *DiLoCo) State() (map[string]*tensor.Tensor, map[string]string) {
	if d.stream != nil {
		// The accounting must hold the all-reduce in flight.
		_ = d.wait()
	}
	sc := d.scalars()
	sc["outer.has_momentum"] = strconv.FormatBool(d.hasMom)
	sc["outer"] = fmt.Sprintf("%+v", d.outer)
	ts := d.quantState()
	ts["prev"], ts["outer.momentum"] = d.prev.Clone(), d.mom.Clone()
	if d.stream != nil {
		d.streamState(ts, sc)
	}
	return ts, sc
}

// LoadState implements train.Stateful. It runs before Setup.
func (d *DiLoCo) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	ts, err := d.loadQuantState(ts)
	if err == nil {
		ts, err = d.loadStreamState(ts, sc)
	}
	if err != nil {
		return err
	}
	prev, ok1 := ts["prev"]
	mom, ok2 := ts["outer.momentum"]
	if !ok1 || !ok2 || len(ts) != 2 {
		return errors.New("diloco: the checkpoint's strategy state lacks prev and outer.momentum")
	}
	if got := fmt.Sprintf("%+v", d.outer); sc["outer"] != got {
		return fmt.Errorf("diloco: the checkpoint's outer optimizer is %s, this run's %s", sc["outer"], got)
	}
	has, err := strconv.ParseBool(sc["outer.has_momentum"])
	if err != nil {
		return fmt.Errorf("diloco: state outer.has_momentum %q: %w", sc["outer.has_momentum"], err)
	}
	if err := d.loadScalars(sc); err != nil {
		return err
	}
	d.hasMom = has
	d.loadPrev = prev.To(cpu.Default())
	d.loadMom = mom.To(cpu.Default())
	return nil
}

// Close frees the strategy's buffers.
func (d *DiLoCo) Close() {
	d.streamClose()
	d.release()
	for _, t := range []*tensor.Tensor{d.prev, d.mom, d.delta, d.loadPrev, d.loadMom} {
		if t != nil {
			t.Release()
		}
	}
	d.prev, d.mom, d.delta, d.loadPrev, d.loadMom = nil, nil, nil, nil, nil
}

// setupStream lays out streaming synchronization, if any (stream.go):
// each fragment sends its pseudo-gradient θ_prev − θ and, when the mean
// arrives, takes the outer step on its own part of θ_prev and of the
// momentum (zero-initialized, so that the first step is Δ itself, as in
// outerStep), the fragment's new common values being θ_prev's.
func (d *DiLoCo) setupStream() error {
	if d.stream == nil {
		return nil
	}
	d.stream.toSend = func(v *tensor.Tensor, lo, hi int) {
		prev := d.prev.Slice(0, lo, hi)
		defer prev.Release()
		v.MulScalarInPlace(-1)
		v.AddInPlace(prev)
	}
	d.stream.fromMean = func(delta *tensor.Tensor, lo, hi int) {
		prev, mom := d.prev.Slice(0, lo, hi), d.mom.Slice(0, lo, hi)
		defer prev.Release()
		defer mom.Release()
		step := delta
		if mu := d.outer.Momentum; mu > 0 {
			mom.MulScalarInPlace(mu)
			mom.AddInPlace(delta)
			if d.outer.Nesterov {
				delta.AddScaledInPlace(mu, mom)
			} else {
				step = mom
			}
		}
		prev.AddScaledInPlace(-d.outer.LR, step)
		delta.CopyFrom(prev)
	}
	return d.streamSetup()
}
