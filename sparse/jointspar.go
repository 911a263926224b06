package sparse

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// Options configure JointSpar.
type Options struct {
	// Budget is the expected fraction of the layers computed and sent per
	// step, in (0, 1]; 1 is plain data-parallel SGD (or LARS).
	Budget float64
	// PMin is the smallest inclusion probability (0: min(0.05, Budget), and
	// with Balanced draws on K workers min(max(0.05, 1/K), Budget), so that
	// every layer goes to one worker or more at every step).
	PMin float64
	// PerWorker draws each worker's layers independently: every worker
	// still skips the work of its unsampled layers, but the all-reduce is
	// dense over all of them (no bytes saved). A layer's update is then
	// the mean of the gradients of the c workers that drew it, scaled by
	// (c/K)/p_ℓ: on K workers its sampling variance is (1 − p_ℓ)/(K·p_ℓ)
	// times its squared norm instead of (1 − p_ℓ)/p_ℓ. By default the
	// workers share one draw per step, from Seed, and all-reduce only the
	// sampled layers.
	PerWorker bool
	// Balanced (which implies PerWorker) couples the workers' draws: every
	// worker still draws layer ℓ with probability p_ℓ, but from one draw
	// shared by all (from Seed), which gives the layer to ⌊K·p_ℓ⌋ or
	// ⌈K·p_ℓ⌉ of the K workers, dealt out in turn so that each worker gets
	// as many layers as the others. A layer's update then averages over a
	// number of workers that varies only by the rounding of K·p_ℓ: the
	// sampling variance, (1 − p_ℓ)/(K·p_ℓ) times the layer's squared norm
	// with independent draws, falls to f(1 − f)/(K·p_ℓ)² times it, f the
	// fractional part of K·p_ℓ (0 where K·p_ℓ is whole), leaving the
	// variance of a gradient over some K·p_ℓ of the K workers' batches.
	// The holders of a layer average it among themselves and send it on to
	// the others, so bytes are saved wherever fewer than K workers hold a
	// layer.
	Balanced bool
	// Seed drives the draws: step t's layers are a function of (Seed, t),
	// and of the rank with PerWorker (not Balanced), so that a resumed run
	// draws the same.
	Seed uint64
	// Decay is the weight of the past in the moving average of each layer's
	// gradient norm (0: 0.9).
	Decay float64
	// Context bounds every collective (nil: dist.DefaultTimeout each).
	Context context.Context
}

// layer is a group of parameters sampled together: those of one module
// (a convolution's weight and bias, a batch norm's scale and shift).
type layer struct {
	name   string
	params []*autograd.Var
	size   int // elements
}

// JointSpar is joint sparsification of computation and communication
// (after Liu & Mozafari, ICML 2022; see the package documentation for
// what is our design): each step samples layers with probabilities p_ℓ,
// computes and all-reduces the gradients of those layers only, rescaled by
// 1/p_ℓ so that the update stays unbiased, and leaves the others
// untouched. With LARS as the optimizer it is JointSpar-LARS: the trust
// ratio is LARS's, and the update it scales is rescaled by 1/p_ℓ (the
// biases' and normalisation parameters' updates are not rescaled).
type JointSpar struct {
	*train.CommAccount
	opt Options

	layers []layer
	norms  []float64
	known  []bool
	p      []float64
	mask   []bool
	// holders are the workers each layer is dealt to, with balanced draws.
	holders [][]int
	flat    *tensor.Tensor // every layer's gradient end to end, then one count per layer
	total   int            // gradient elements

	// compute and layersSum are checkpointed with the account.
	compute   time.Duration
	layersSum int64
	stepStart time.Time
}

var (
	_ train.Strategy     = (*JointSpar)(nil)
	_ train.StepPreparer = (*JointSpar)(nil)
	_ train.Stateful     = (*JointSpar)(nil)
	_ train.CommReporter = (*JointSpar)(nil)
)

// New returns JointSpar over c.
func New(c dist.Comm, opt Options) (*JointSpar, error) {
	if c == nil {
		return nil, errors.New("jointspar: nil Comm")
	}
	if opt.Balanced {
		opt.PerWorker = true
	}
	if opt.PMin == 0 {
		opt.PMin = min(0.05, opt.Budget)
		if opt.Balanced {
			// Every layer goes to a worker or more at every step.
			opt.PMin = min(max(0.05, 1/float64(c.Size())), opt.Budget)
		}
	}
	if opt.Decay == 0 {
		opt.Decay = 0.9
	}
	if !(opt.Budget > 0 && opt.Budget <= 1) || !(opt.PMin > 0 && opt.PMin <= opt.Budget) || !(opt.Decay > 0 && opt.Decay < 1) {
		return nil, fmt.Errorf("jointspar: budget %v, p_min %v, decay %v: want 0 < p_min ≤ budget ≤ 1 and 0 < decay < 1", opt.Budget, opt.PMin, opt.Decay)
	}
	return &JointSpar{CommAccount: train.NewCommAccount(c, opt.Context, "jointspar"), opt: opt}, nil
}

// String names the strategy.
func (j *JointSpar) String() string {
	draw := "layers drawn in common"
	if j.opt.Balanced {
		draw = "layers dealt out to the workers"
	} else if j.opt.PerWorker {
		draw = "layers drawn per worker"
	}
	return fmt.Sprintf("JointSpar, budget %g of %d layers (%s, p_min %g)", j.opt.Budget, len(j.layers), draw, j.opt.PMin)
}

// Layers returns the names of the sampled groups, in order.
func (j *JointSpar) Layers() []string {
	out := make([]string, len(j.layers))
	for i, l := range j.layers {
		out[i] = l.name
	}
	return out
}

// Probabilities returns the inclusion probabilities of the current step.
func (j *JointSpar) Probabilities() []float64 { return append([]float64(nil), j.p...) }

// Sampled reports which layers the current step computes.
func (j *JointSpar) Sampled() []bool { return append([]bool(nil), j.mask...) }

// Setup implements train.Strategy: it groups the parameters that require
// a gradient by module, checks that the workers hold the same model and
// copies rank 0's to the others.
func (j *JointSpar) Setup(s *train.StepContext) error {
	if j.flat != nil {
		return errors.New("jointspar: Setup called twice")
	}
	for _, p := range s.Params {
		if !p.Param.RequiresGrad() {
			continue
		}
		name := p.Name
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = name[:i]
		}
		if n := len(j.layers); n == 0 || j.layers[n-1].name != name {
			j.layers = append(j.layers, layer{name: name})
		}
		l := &j.layers[len(j.layers)-1]
		l.params = append(l.params, p.Param)
		l.size += p.Param.Value.NumElements()
		j.total += p.Param.Value.NumElements()
	}
	if len(j.layers) == 0 {
		return errors.New("jointspar: the model has no parameter that requires a gradient")
	}
	if j.norms == nil {
		j.norms = make([]float64, len(j.layers))
		j.known = make([]bool, len(j.layers))
	} else if len(j.norms) != len(j.layers) {
		return fmt.Errorf("jointspar: the checkpoint has norms of %d layers, this model %d", len(j.norms), len(j.layers))
	}
	dt := j.layers[0].params[0].Value.DType()
	j.flat = tensor.Zeros(tensor.Shape{j.total + len(j.layers)}, tensor.Of(dt), tensor.On(dist.DeviceOf(j.Comm())))
	// The workers' models are equal at every step: a resumed run
	// broadcasts rank 0's too.
	return j.StartModel(s, true)
}

// BeforeStep implements train.StepPreparer: it computes this step's
// probabilities, draws its layers and switches the others' gradients off,
// so that backward skips their weight gradients (and every gradient below
// the lowest layer drawn).
func (j *JointSpar) BeforeStep(s *train.StepContext) error {
	j.stepStart = time.Now()
	j.p = Probabilities(j.norms, j.known, j.opt.Budget, j.opt.PMin)
	j.mask = make([]bool, len(j.layers))
	switch {
	case j.opt.Balanced:
		// One deal for all the workers, from a stream of its own.
		r := rand.New(rand.NewPCG(j.opt.Seed, uint64(s.Step)|1<<62))
		j.holders = balancedDraw(r, j.p, j.Meter.Size())
		for i, h := range j.holders {
			j.mask[i] = slices.Contains(h, j.Meter.Rank())
		}
	default:
		stream := uint64(s.Step)
		if j.opt.PerWorker {
			stream |= uint64(j.Meter.Rank()+1) << 40
		}
		r := rand.New(rand.NewPCG(j.opt.Seed, stream))
		for i := range j.layers {
			j.mask[i] = r.Float64() < j.p[i]
		}
	}
	for i, l := range j.layers {
		for _, v := range l.params {
			v.SetRequiresGrad(j.mask[i])
		}
	}
	return nil
}

// balancedDraw deals the layers out to k workers from r, a draw shared by
// the workers: layer ℓ goes to n_ℓ workers, ⌊k·p_ℓ⌋ or ⌈k·p_ℓ⌉ with
// E[n_ℓ] = k·p_ℓ, taken in turn from a random permutation of the workers,
// the next layer starting where the last one stopped. It returns each
// layer's workers, in ascending order. Every worker is alike under the
// permutation, so each draws layer ℓ with probability E[n_ℓ]/k = p_ℓ, as
// with independent draws; but the number of workers that draw a layer no
// longer varies beyond the rounding of k·p_ℓ, and the layers are dealt
// out evenly.
func balancedDraw(r *rand.Rand, p []float64, k int) [][]int {
	perm := r.Perm(k)
	holders := make([][]int, len(p))
	pos := 0
	for i, pi := range p {
		x := float64(k) * pi
		n := int(math.Floor(x))
		if r.Float64() < x-float64(n) {
			n++
		}
		n = min(n, k)
		for range n {
			holders[i] = append(holders[i], perm[pos])
			pos = (pos + 1) % k
		}
		slices.Sort(holders[i])
	}
	return holders
}

// AfterBackward implements train.Strategy: it averages the sampled layers'
// gradients over the workers, rescales them by 1/p_ℓ and updates the norm
// estimates.
func (j *JointSpar) AfterBackward(s *train.StepContext) error {
	if j.flat == nil || j.mask == nil {
		return errors.New("jointspar: AfterBackward before Setup and BeforeStep")
	}
	j.compute += time.Since(j.stepStart)
	j.Stepped(int64(j.total * j.flat.DType().Size()))
	defer j.Block(time.Now())
	for i, m := range j.mask {
		if !m {
			continue
		}
		j.layersSum++
		for _, v := range j.layers[i].params {
			if v.Grad() == nil {
				// Sampled, but the loss does not depend on it this step.
				v.SetGrad(tensor.ZerosLike(v.Value))
			}
		}
	}
	if j.opt.Balanced {
		return j.balancedAverage(s.Optimizer)
	}
	if j.opt.PerWorker {
		return j.denseAverage(s.Optimizer)
	}
	// The workers drew the same layers: all-reduce those only, end to end.
	n := 0
	j.walk(func(v *autograd.Var, part *tensor.Tensor) {
		part.CopyFrom(v.Grad())
		n += part.NumElements()
	})
	if n > 0 && j.Meter.Size() > 1 {
		head := j.flat.Slice(0, 0, n)
		err := j.Collective("all-reduce", func(ctx context.Context) error { return j.Meter.AllReduce(ctx, head, dist.Avg) })
		head.Release()
		if err != nil {
			return err
		}
	}
	j.walk(func(v *autograd.Var, part *tensor.Tensor) { v.Grad().CopyFrom(part) })
	for i, l := range j.layers {
		if !j.mask[i] {
			continue
		}
		var sq float64
		for _, v := range l.params {
			sq += v.Grad().SquaredNorm()
		}
		j.observe(i, math.Sqrt(sq))
		j.scale(s.Optimizer, i, 1/j.p[i])
	}
	return nil
}

// scale makes layer i's update an unbiased estimate: the optimizer scales
// the update by s where it can (SGD, LARS: LARS's trust ratio would undo a
// scaled gradient), otherwise the gradient is scaled. The parameters that
// a layer-wise optimizer does not adapt (LARS's biases and normalisation
// parameters, stepped with the plain gradient at LARS's large rate) keep
// their update unscaled: a step of s·η·g at such a rate diverges.
func (j *JointSpar) scale(o optim.Optimizer, i int, s float64) {
	us, ok := o.(optim.UpdateScaler)
	ad, adaptive := o.(optim.Adaptive)
	for _, v := range j.layers[i].params {
		if adaptive && !ad.Adapts(v) {
			continue
		}
		if ok {
			us.SetUpdateScale(v, s)
		} else if s != 1 {
			v.Grad().MulScalarInPlace(s)
		}
	}
}

// denseAverage all-reduces every layer's slot, zero where this worker did
// not draw it, with a count per layer of the workers that drew it. A layer
// c of K workers drew gets the mean of their gradients, ḡ, and the update
// scale (c/K)/p_ℓ: s·ḡ = Σ_k 1{k drew ℓ}·g_k / (K·p_ℓ), the unbiased
// estimate.
func (j *JointSpar) denseAverage(o optim.Optimizer) error {
	counts := j.flat.Slice(0, j.total, j.total+len(j.layers))
	defer counts.Release()
	j.packDrawn(true)
	cs := make([]float64, len(j.layers))
	for i, m := range j.mask {
		if m {
			cs[i] = 1
		}
	}
	c := tensor.FromSlice(cs, tensor.Shape{len(cs)}, tensor.On(cpu.Default()))
	cc := c.Cast(counts.DType())
	counts.CopyFrom(cc)
	c.Release()
	cc.Release()
	if j.Meter.Size() > 1 {
		if err := j.Collective("all-reduce", func(ctx context.Context) error { return j.Meter.AllReduce(ctx, j.flat, dist.Avg) }); err != nil {
			return err
		}
	}
	// Each layer's slot holds the sum of its gradients over K; got[i] is
	// the fraction c/K of the workers that drew it.
	got := tensor.ToSlice[float64](counts)
	j.takeAverages(o, got, true)
	return nil
}

// eachParam calls fn with every parameter of every layer i and its part of
// flat (every layer end to end, in layer order), a flat view.
func (j *JointSpar) eachParam(fn func(i int, v *autograd.Var, part *tensor.Tensor)) {
	off := 0
	for i, l := range j.layers {
		for _, v := range l.params {
			n := v.Value.NumElements()
			part := j.flat.Slice(0, off, off+n)
			fn(i, v, part)
			part.Release()
			off += n
		}
	}
}

// packDrawn copies the gradients of the layers this worker drew into
// their parts of flat, and zeroes the other layers' parts when zero is set.
func (j *JointSpar) packDrawn(zero bool) {
	j.eachParam(func(i int, v *autograd.Var, part *tensor.Tensor) {
		if j.mask[i] {
			g := v.Grad().View(part.NumElements())
			part.CopyFrom(g)
			g.Release()
		} else if zero {
			part.Fill(0)
		}
	})
}

// takeAverages sets the gradients of every layer with frac[i] > 0, the
// fraction of the workers that drew it, from its part of flat (divided by
// frac[i] when divide is set, flat then holding the sum over all K
// workers), folds their norms into the estimates and scales the layer's
// update by frac[i]/p_ℓ; the other layers' gradients are zeroed.
func (j *JointSpar) takeAverages(o optim.Optimizer, frac []float64, divide bool) {
	sq := make([]float64, len(j.layers))
	j.eachParam(func(i int, v *autograd.Var, part *tensor.Tensor) {
		if frac[i] == 0 {
			v.ZeroGrad()
			return
		}
		if v.Grad() == nil {
			v.SetGrad(tensor.EmptyLike(v.Value))
		}
		g := v.Grad()
		view := part.View(v.Value.Shape()...)
		g.CopyFrom(view)
		view.Release()
		if divide {
			g.MulScalarInPlace(1 / frac[i])
		}
		sq[i] += g.SquaredNorm()
	})
	for i, f := range frac {
		if f > 0 {
			j.observe(i, math.Sqrt(sq[i]))
			j.scale(o, i, f/j.p[i])
		}
	}
}

// Tags of balancedAverage's two rounds of messages.
const (
	tagReduce = 1 + iota
	tagGather
)

// balancedAverage averages each layer over the workers it was dealt to,
// sending only what they hold. Each layer's n holders split it into n
// chunks, the q-th owned by the q-th holder: every holder sends its other
// chunks to their owners, which average them; then every owner sends its
// averaged chunks to every other worker. A layer of n holders costs its
// size times n − 1 + K − 1 in all, against 2(K − 1) for a ring all-reduce
// over every worker: less whenever fewer than K workers hold it, nothing
// when none does. The messages between two workers in a round travel as
// one, the chunks end to end in layer order. The layer's update is then
// scaled by (n/K)/p_ℓ, whose mean is 1.
func (j *JointSpar) balancedAverage(o optim.Optimizer) error {
	K, me := j.Meter.Size(), j.Meter.Rank()
	type chunk struct{ layer, lo, hi int } // elements [lo, hi) of flat
	owned := make([][]chunk, K)            // by owner
	from := make([][]chunk, K)             // what each worker sends me to reduce
	to := make([][]chunk, K)               // what I send each owner to reduce
	off := 0
	for i, l := range j.layers {
		h := j.holders[i]
		for q, w := range h {
			c := chunk{i, off + q*l.size/len(h), off + (q+1)*l.size/len(h)}
			if c.lo == c.hi {
				continue
			}
			owned[w] = append(owned[w], c)
			if j.mask[i] && w != me {
				to[w] = append(to[w], c)
			}
			if w == me {
				for _, v := range h {
					if v != me {
						from[v] = append(from[v], c)
					}
				}
			}
		}
		off += l.size
	}
	j.packDrawn(false)
	dev := tensor.On(dist.DeviceOf(j.Comm()))
	dt := tensor.Of(j.flat.DType())
	var bufs []*tensor.Tensor
	defer func() {
		for _, b := range bufs {
			b.Release()
		}
	}()
	// each calls fn with every chunk of cs: its part of flat and of b.
	each := func(b *tensor.Tensor, cs []chunk, fn func(part, in *tensor.Tensor)) {
		at := 0
		for _, c := range cs {
			part, in := j.flat.Slice(0, c.lo, c.hi), b.Slice(0, at, at+c.hi-c.lo)
			fn(part, in)
			part.Release()
			in.Release()
			at += c.hi - c.lo
		}
	}
	// buffer returns a buffer for cs, filled from flat when pack is set.
	buffer := func(cs []chunk, pack bool) *tensor.Tensor {
		n := 0
		for _, c := range cs {
			n += c.hi - c.lo
		}
		b := tensor.Empty(tensor.Shape{n}, dt, dev)
		bufs = append(bufs, b)
		if pack {
			each(b, cs, func(part, in *tensor.Tensor) { in.CopyFrom(part) })
		}
		return b
	}
	// round sends out(w) to every worker w for which it is not nil,
	// receives in[w] from every worker w ≠ me for which it is not empty,
	// and applies each received chunk to its part of flat.
	round := func(what string, tag int, out func(w int) *tensor.Tensor, in [][]chunk, apply func(part, got *tensor.Tensor)) error {
		var sends, recvs []dist.Message
		got := make([]*tensor.Tensor, K)
		for w := range K {
			if w == me {
				continue
			}
			if t := out(w); t != nil {
				sends = append(sends, dist.Message{Peer: w, T: t, Tag: tag})
			}
			if len(in[w]) > 0 {
				got[w] = buffer(in[w], false)
				recvs = append(recvs, dist.Message{Peer: w, T: got[w], Tag: tag})
			}
		}
		err := j.Collective(what, func(ctx context.Context) error { return dist.Exchange(ctx, j.Meter, sends, recvs) })
		if err != nil {
			return err
		}
		for w, b := range got {
			if b != nil {
				each(b, in[w], apply)
			}
		}
		return nil
	}
	// Round 1: the owners gather their chunks' gradients and average them.
	err := round("reduce", tagReduce, func(w int) *tensor.Tensor {
		if len(to[w]) == 0 {
			return nil
		}
		return buffer(to[w], true)
	}, from, func(part, in *tensor.Tensor) { part.AddInPlace(in) })
	if err != nil {
		return err
	}
	for _, c := range owned[me] {
		if n := len(j.holders[c.layer]); n > 1 {
			part := j.flat.Slice(0, c.lo, c.hi)
			part.MulScalarInPlace(1 / float64(n))
			part.Release()
		}
	}
	// Round 2: every owner sends its averaged chunks to every other worker.
	var mine *tensor.Tensor
	if len(owned[me]) > 0 {
		mine = buffer(owned[me], true)
	}
	err = round("gather", tagGather, func(int) *tensor.Tensor { return mine }, owned, func(part, in *tensor.Tensor) { part.CopyFrom(in) })
	if err != nil {
		return err
	}
	frac := make([]float64, len(j.layers))
	for i, h := range j.holders {
		frac[i] = float64(len(h)) / float64(K)
	}
	j.takeAverages(o, frac, false)
	return nil
}

// walk calls fn with each parameter of the sampled layers and its part of
// flat, packed end to end in layer order, as a view in its shape.
func (j *JointSpar) walk(fn func(v *autograd.Var, part *tensor.Tensor)) {
	off := 0
	for i, l := range j.layers {
		if !j.mask[i] {
			continue
		}
		for _, v := range l.params {
			n := v.Value.NumElements()
			part := j.flat.Slice(0, off, off+n)
			view := part.View(v.Value.Shape()...)
			fn(v, view)
			view.Release()
			part.Release()
			off += n
		}
	}
}

// observe folds a measured norm of layer i's gradient into its estimate.
func (j *JointSpar) observe(i int, norm float64) {
	if !j.known[i] {
		j.norms[i], j.known[i] = norm, true
		return
	}
	j.norms[i] = j.opt.Decay*j.norms[i] + (1-j.opt.Decay)*norm
}

// AfterStep implements train.Strategy: every layer requires its gradient
// again, and no update is scaled.
func (j *JointSpar) AfterStep(s *train.StepContext) error {
	us, _ := s.Optimizer.(optim.UpdateScaler)
	for _, l := range j.layers {
		for _, v := range l.params {
			v.SetRequiresGrad(true)
			if us != nil {
				us.SetUpdateScale(v, 1)
			}
		}
	}
	j.Synced()
	return nil
}

// CommStats implements train.CommReporter: the account's counts, the
// layers computed per step and the time spent computing.
func (j *JointSpar) CommStats() train.CommStats {
	st := j.CommAccount.CommStats()
	st.Compute = j.compute.Seconds()
	if st.Syncs > 0 {
		st.LayersPerStep = float64(j.layersSum) / float64(st.Syncs)
	}
	return st
}

// State implements train.Stateful: the norm estimates (the draws are a
// function of the step) and the accounting.
func (j *JointSpar) State() (map[string]*tensor.Tensor, map[string]string) {
	known := make([]string, len(j.known))
	for i, k := range j.known {
		known[i] = strconv.FormatBool(k)
	}
	sc := j.CommAccount.State()
	sc["known"] = strings.Join(known, ",")
	sc["budget"] = strconv.FormatFloat(j.opt.Budget, 'g', -1, 64)
	sc["layers_sum"] = strconv.FormatInt(j.layersSum, 10)
	sc["compute_ns"] = strconv.FormatInt(int64(j.compute), 10)
	return map[string]*tensor.Tensor{"norms": tensor.FromSlice(append([]float64(nil), j.norms...), tensor.Shape{len(j.norms)})}, sc
}

// LoadState implements train.Stateful. It runs before Setup.
func (j *JointSpar) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	t, ok := ts["norms"]
	if !ok || len(ts) != 1 {
		return errors.New("jointspar: the checkpoint's strategy state lacks the norm estimates")
	}
	if b := strconv.FormatFloat(j.opt.Budget, 'g', -1, 64); sc["budget"] != b {
		return fmt.Errorf("jointspar: the checkpoint was written with budget %s, this run has %s", sc["budget"], b)
	}
	norms := tensor.ToSlice[float64](t)
	parts := strings.Split(sc["known"], ",")
	if len(parts) != len(norms) {
		return fmt.Errorf("jointspar: %d norms but %d known flags", len(norms), len(parts))
	}
	known := make([]bool, len(parts))
	for i, s := range parts {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("jointspar: known flag %q: %w", s, err)
		}
		known[i] = b
	}
	j.norms, j.known = norms, known
	if sc["syncs"] == "" {
		// A checkpoint written before the accounting was kept: its
		// counts start again from zero.
		return nil
	}
	layers, e1 := strconv.ParseInt(sc["layers_sum"], 10, 64)
	compute, e2 := strconv.ParseInt(sc["compute_ns"], 10, 64)
	if err := errors.Join(e1, e2); err != nil {
		return fmt.Errorf("jointspar: state: %w", err)
	}
	j.layersSum, j.compute = layers, time.Duration(compute)
	return j.CommAccount.LoadState(sc)
}

// Close frees the strategy's buffer and switches every layer's gradient
// back on.
func (j *JointSpar) Close() {
	for _, l := range j.layers {
		for _, v := range l.params {
			v.SetRequiresGrad(true)
		}
	}
	if j.flat != nil {
		j.flat.Release()
		j.flat = nil
	}
}
