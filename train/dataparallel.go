package train

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

func init() {
	RegisterStrategy(StrategyKind{
		Name:     "dp",
		Summary:  "data parallel: gradients averaged every step",
		Settings: func() StrategySettings { return &noSettings{} },
		New: func(c dist.Comm, _ StrategySettings, run StrategyRun) (Strategy, error) {
			return NewDataParallel(c, DataParallelOptions{Context: run.Context}), nil
		},
	})
}

// noSettings are the settings of a strategy that has none.
type noSettings struct{}

func (*noSettings) Flags(*flag.FlagSet)   {}
func (*noSettings) Validate(string) error { return nil }

// DefaultBucketBytes is the default size cap of a gradient bucket, PyTorch
// DistributedDataParallel's 25 MiB.
const DefaultBucketBytes = 25 << 20

// DataParallelOptions tune a DataParallel strategy.
type DataParallelOptions struct {
	// BucketBytes caps the bytes of a gradient bucket (0: DefaultBucketBytes).
	// A parameter larger than the cap gets a bucket of its own.
	BucketBytes int
	// Context bounds every collective; nil means context.Background, so
	// that each operation is bounded by the Comm's own timeout.
	Context context.Context
}

// DataParallel is synchronous data parallelism (PyTorch's
// DistributedDataParallel): every rank holds the whole model, computes the
// gradient of its own shard of the batch, and the ranks average their
// gradients before each optimizer step, so that all take the same step.
//
// With K ranks each on a batch of b samples whose loss is the mean over
// its batch, the averaged gradient
//
//	ḡ = (1/K) Σ_r ∇(1/b) Σ_{i∈B_r} ℓ_i = ∇ 1/(Kb) Σ_{i∈B_1∪…∪B_K} ℓ_i
//
// is the gradient of one worker's batch B_1∪…∪B_K of K·b samples; with the
// Trainer's sharding (Options.Rank and World) those are exactly the samples
// one worker with batch K·b would see at the same step, so the runs agree
// up to the rounding of the sums. Layers whose output depends on the whole
// batch (batch normalisation) normalise over the local b samples instead.
//
// Setup checks that every rank has parameters and buffers with the same
// names, dtypes and shapes (an all-gather of a hash), then broadcasts
// rank 0's parameters and buffers to the others. It groups the parameters
// that require a gradient into buckets of at most BucketBytes, in reverse
// registration order — roughly the order backward produces their
// gradients — and registers an autograd OnGradReady hook on each. During
// backward a hook copies the finished gradient into its bucket's flat
// buffer, allocated where the Comm takes its operands (dist.DeviceOf: the
// GPU for NCCL, host memory for the other transports, whatever device the
// model is on); when a bucket is full it is all-reduced (dist.Avg) on a
// dist.Queue while backward goes on with the earlier layers. Buckets are
// launched strictly in bucket order, the same on every rank whatever the
// order the hooks fire in. AfterBackward fills the slots of parameters
// that got no gradient this step with zeros, launches what remains, waits
// for every bucket and copies the averages back into the gradients.
//
// A DataParallel serves one Trainer; Close stops its queue and frees its
// buffers (the Comm stays open, owned by the caller).
type DataParallel struct {
	*CommAccount
	bucketBytes int

	q       *dist.Queue
	slots   []dpSlot
	buckets []*dpBucket
	next    int   // first bucket not launched this step
	hookErr error // first misuse seen by a hook this step
	closed  bool
}

// dpSlot is a parameter's place in its bucket.
type dpSlot struct {
	name   string
	v      *autograd.Var
	bucket int
	view   *tensor.Tensor // the parameter's part of the bucket, in its shape
	ready  bool
}

// dpBucket is a flat buffer on the Comm's device holding the gradients of
// some parameters.
type dpBucket struct {
	flat    *tensor.Tensor // [n], contiguous on dist.DeviceOf(comm)
	slots   []int
	pending int
	work    *dist.Work
}

var (
	_ Strategy     = (*DataParallel)(nil)
	_ CommReporter = (*DataParallel)(nil)
	_ Stateful     = (*DataParallel)(nil)
)

// NewDataParallel returns the data-parallel strategy over c.
func NewDataParallel(c dist.Comm, opts DataParallelOptions) *DataParallel {
	if c == nil {
		panic("train: NewDataParallel with a nil Comm")
	}
	bb := opts.BucketBytes
	if bb <= 0 {
		bb = DefaultBucketBytes
	}
	return &DataParallel{CommAccount: NewCommAccount(c, opts.Context, "data parallel"), bucketBytes: bb}
}

// String names the strategy for people.
func (d *DataParallel) String() string { return "data parallel (gradients averaged every step)" }

// CommStats implements CommReporter: what data parallelism would send is
// what it sent. The counts go on across a resume from a checkpoint.
func (d *DataParallel) CommStats() CommStats {
	st := d.CommAccount.CommStats()
	st.DataParallelBytes = st.Sent
	return st
}

// State implements Stateful: the accounting, so that a resumed run's
// bytes and synchronizations go on from the checkpoint's.
func (d *DataParallel) State() (map[string]*tensor.Tensor, map[string]string) {
	return nil, d.CommAccount.State()
}

// LoadState implements Stateful. It runs before Setup.
func (d *DataParallel) LoadState(ts map[string]*tensor.Tensor, sc map[string]string) error {
	if len(ts) > 0 {
		return fmt.Errorf("data parallel: the checkpoint's strategy state holds %d tensors; data parallel keeps none", len(ts))
	}
	if sc["syncs"] == "" {
		// A checkpoint written before the accounting was kept: its
		// counts start again from zero.
		return nil
	}
	return d.CommAccount.LoadState(sc)
}

// Buckets returns the names of the parameters of each bucket, in launch
// order (nil before Setup).
func (d *DataParallel) Buckets() [][]string {
	out := make([][]string, len(d.buckets))
	for i, b := range d.buckets {
		for _, s := range b.slots {
			out[i] = append(out[i], d.slots[s].name)
		}
	}
	return out
}

// Setup implements Strategy: it checks that the ranks agree on the model,
// broadcasts rank 0's parameters and buffers, builds the buckets and
// registers the gradient hooks.
func (d *DataParallel) Setup(s *StepContext) error {
	if d.closed {
		return errors.New("data parallel: setup after Close")
	}
	if d.q != nil {
		return errors.New("data parallel: Setup called twice")
	}
	var bufs []namedTensor
	if s.Model != nil {
		for _, b := range s.Model.NamedBuffers() {
			bufs = append(bufs, namedTensor{b.Name, b.Buffer})
		}
	}
	if err := d.Collective("check parameters", func(ctx context.Context) error {
		return checkSameModel(ctx, d.Meter, s, bufs)
	}); err != nil {
		return err
	}
	d.buildBuckets(s)

	for _, b := range d.buckets {
		for _, i := range b.slots {
			d.slots[i].view.CopyFrom(d.slots[i].v.Value)
		}
		if err := d.Collective("broadcast parameters", func(ctx context.Context) error {
			return d.Meter.Broadcast(ctx, b.flat, 0)
		}); err != nil {
			return err
		}
		if d.Meter.Rank() != 0 {
			for _, i := range b.slots {
				d.slots[i].v.Value.CopyFrom(d.slots[i].view)
			}
		}
	}
	for _, p := range s.Params {
		if !p.Param.RequiresGrad() {
			bufs = append(bufs, namedTensor{p.Name, p.Param.Value})
		}
	}
	for _, b := range bufs {
		if err := d.Collective("broadcast "+b.name, func(ctx context.Context) error {
			return broadcastTensor(ctx, d.Meter, b.t)
		}); err != nil {
			return err
		}
	}

	for i := range d.slots {
		d.slots[i].v.OnGradReady(func(*autograd.Var) { d.gradReady(i) })
	}
	d.q = dist.NewQueue(d.Context(), d.Meter)
	d.SetupDone()
	return nil
}

type namedTensor struct {
	name string
	t    *tensor.Tensor
}

// broadcastTensor copies rank 0's value of t into t on every rank,
// staging it through a contiguous tensor on c's device when c cannot take
// t where it lies.
func broadcastTensor(ctx context.Context, c dist.Comm, t *tensor.Tensor) error {
	direct := dist.Holds(c, t) && t.IsContiguous()
	src := t
	if !direct {
		src = tensor.Empty(t.Shape(), tensor.Of(t.DType()), tensor.On(dist.DeviceOf(c)))
		defer src.Release()
		src.CopyFrom(t)
	}
	if err := c.Broadcast(ctx, src, 0); err != nil {
		return err
	}
	if !direct {
		t.CopyFrom(src)
	}
	return nil
}

// BroadcastModel checks that every rank of c has parameters and buffers
// with the same names, dtypes and shapes, then copies rank 0's parameters
// and buffers to the others: the start of every multi-worker strategy.
func BroadcastModel(ctx context.Context, c dist.Comm, s *StepContext) error {
	var bufs []namedTensor
	if s.Model != nil {
		for _, b := range s.Model.NamedBuffers() {
			bufs = append(bufs, namedTensor{b.Name, b.Buffer})
		}
	}
	if err := checkSameModel(ctx, c, s, bufs); err != nil {
		return err
	}
	for _, p := range s.Params {
		bufs = append(bufs, namedTensor{p.Name, p.Param.Value})
	}
	for _, b := range bufs {
		if err := broadcastTensor(ctx, c, b.t); err != nil {
			return fmt.Errorf("broadcast %s: %w", b.name, err)
		}
	}
	return nil
}

// CheckSameModel checks that every rank of c has parameters and buffers
// with the same names, dtypes and shapes, without changing them.
func CheckSameModel(ctx context.Context, c dist.Comm, s *StepContext) error {
	var bufs []namedTensor
	if s.Model != nil {
		for _, b := range s.Model.NamedBuffers() {
			bufs = append(bufs, namedTensor{b.Name, b.Buffer})
		}
	}
	return checkSameModel(ctx, c, s, bufs)
}

// checkSameModel all-gathers a 64-bit FNV-1a hash of the names, dtypes and
// shapes of the parameters and buffers, as four 16-bit pieces in float32
// (exact, so any backend can carry them), and names the ranks whose hash
// differs from rank 0's.
func checkSameModel(ctx context.Context, c dist.Comm, s *StepContext, bufs []namedTensor) error {
	h := fnv.New64a()
	for _, p := range s.Params {
		fmt.Fprintf(h, "param %q %v %v %v\n", p.Name, p.Param.Value.DType(), p.Param.Value.Shape(), p.Param.RequiresGrad())
	}
	for _, b := range bufs {
		fmt.Fprintf(h, "buffer %q %v %v\n", b.name, b.t.DType(), b.t.Shape())
	}
	sum := h.Sum64()
	const pieces = 4
	mine := make([]float32, pieces)
	for i := range mine {
		mine[i] = float32(sum >> (16 * i) & 0xffff)
	}
	n := c.Size()
	dev := dist.DeviceOf(c)
	src := tensor.FromSlice(mine, tensor.Shape{pieces}, tensor.On(dev))
	defer src.Release()
	dst := tensor.Zeros(tensor.Shape{n * pieces}, tensor.On(dev))
	defer dst.Release()
	if err := c.AllGather(ctx, dst, src); err != nil {
		return err
	}
	all := dst.Float32s()
	var differ []int
	for r := 1; r < n; r++ {
		for i := range pieces {
			if all[r*pieces+i] != all[i] {
				differ = append(differ, r)
				break
			}
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("the parameters or buffers of rank(s) %v differ from rank 0's in names, dtypes or shapes", differ)
	}
	return nil
}

// buildBuckets assigns the parameters that require a gradient, last first,
// to buckets of one dtype and at most bucketBytes each.
func (d *DataParallel) buildBuckets(s *StepContext) {
	var cur []int
	size := 0
	flush := func() {
		if len(cur) == 0 {
			return
		}
		n := 0
		for _, i := range cur {
			n += d.slots[i].v.Value.NumElements()
		}
		b := &dpBucket{
			flat:    tensor.Zeros(tensor.Shape{n}, tensor.Of(d.slots[cur[0]].v.Value.DType()), tensor.On(dist.DeviceOf(d.Comm()))),
			slots:   cur,
			pending: len(cur),
		}
		off := 0
		for _, i := range cur {
			v := d.slots[i].v.Value
			part := b.flat.Slice(0, off, off+v.NumElements())
			d.slots[i].view = part.View(v.Shape()...)
			d.slots[i].bucket = len(d.buckets)
			part.Release()
			off += v.NumElements()
		}
		d.buckets = append(d.buckets, b)
		cur, size = nil, 0
	}
	for j := len(s.Params) - 1; j >= 0; j-- {
		p := s.Params[j]
		if !p.Param.RequiresGrad() {
			continue
		}
		bytes := p.Param.Value.NumElements() * p.Param.Value.DType().Size()
		if len(cur) > 0 && (size+bytes > d.bucketBytes || d.slots[cur[0]].v.Value.DType() != p.Param.Value.DType()) {
			flush()
		}
		d.slots = append(d.slots, dpSlot{name: p.Name, v: p.Param})
		cur = append(cur, len(d.slots)-1)
		size += bytes
	}
	flush()
}

// gradReady runs on the backward goroutine when slot i's gradient is final.
func (d *DataParallel) gradReady(i int) {
	if d.closed || d.q == nil {
		return
	}
	s := &d.slots[i]
	if s.ready {
		if d.hookErr == nil {
			d.hookErr = fmt.Errorf("data parallel: the gradient of %s was finished twice in one step (one backward pass per step)", s.name)
		}
		return
	}
	if g := s.v.Grad(); g != nil {
		s.view.CopyFrom(g)
	} else {
		s.view.Fill(0)
	}
	d.markReady(s)
}

func (d *DataParallel) markReady(s *dpSlot) {
	s.ready = true
	d.buckets[s.bucket].pending--
	for d.next < len(d.buckets) && d.buckets[d.next].pending == 0 {
		b := d.buckets[d.next]
		b.work = d.q.AllReduce(b.flat, dist.Avg)
		d.next++
	}
}

// AfterBackward implements Strategy: it waits for every bucket's average
// and writes it into the parameters' gradients.
func (d *DataParallel) AfterBackward(*StepContext) error {
	if d.q == nil {
		return errors.New("data parallel: AfterBackward before Setup")
	}
	for i := range d.slots {
		s := &d.slots[i]
		if s.ready {
			continue
		}
		if g := s.v.Grad(); g != nil {
			s.view.CopyFrom(g)
		} else {
			s.view.Fill(0)
		}
		d.markReady(s)
	}
	var err error
	start := time.Now()
	for _, b := range d.buckets {
		if werr := b.work.Wait(d.Context()); werr != nil && err == nil {
			err = fmt.Errorf("data parallel: all-reduce of gradients: %w", werr)
		}
		b.work = nil
		b.pending = len(b.slots)
	}
	d.Block(start)
	d.Synced()
	d.next = 0
	err = errors.Join(d.hookErr, err)
	d.hookErr = nil
	for i := range d.slots {
		s := &d.slots[i]
		s.ready = false
		if err != nil {
			continue
		}
		if g := s.v.Grad(); g != nil {
			g.CopyFrom(s.view)
		} else {
			g := tensor.EmptyLike(s.v.Value)
			g.CopyFrom(s.view)
			s.v.SetGrad(g)
		}
	}
	return err
}

// AfterStep implements Strategy; the ranks' parameters are already equal.
func (d *DataParallel) AfterStep(*StepContext) error { return nil }

// Close waits for the issued collectives, stops the queue and frees the
// buckets. The hooks stay registered on the parameters but do nothing.
func (d *DataParallel) Close() {
	if d.closed {
		return
	}
	d.closed = true
	if d.q != nil {
		d.q.Close()
	}
	for i := range d.slots {
		d.slots[i].view.Release()
	}
	for _, b := range d.buckets {
		b.flat.Release()
	}
}
