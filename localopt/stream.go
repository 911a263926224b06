package localopt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// Streaming synchronization (Options.Fragments, Options.Overlap), after
// Streaming DiLoCo (Douillard et al., 2025) and torchft's fragments: the
// flat buffer of what Local averages is cut into P fragments of nearly
// equal size, and in a round of H steps fragment p is synchronized after
// step ⌈H·(p+1)/P⌉ of the round (fragments that fall on the same step go
// together; the last at the round's end). Each synchronization sends a
// P-th of the model, so its peak bytes fall by P.
//
// With an overlap of τ steps, a fragment's all-reduce runs in the
// background while the worker takes its next τ steps, and its result is
// merged after the τ-th of them:
//
//	θ_f ← mean_k θ_f,k(t) + (θ_f(t+τ) − θ_f(t))
//
// the workers' mean of the fragment as it was at the launch t, plus what
// this worker's own steps changed since; with τ = 0 it is the plain
// average. A merge comes earlier when the next fragment is due sooner, and
// at the latest after the run's last step, so that at most one
// synchronization is in flight. Only the training loop ever waits for one:
// evaluations and checkpoints wait for its all-reduce without merging it,
// and a checkpoint holds the all-reduce's result and the launch values, so
// that a resumed run merges at the same step with the same values.
//
// DiLoCo streams the same way: a fragment sends its pseudo-gradient
// θ_prev − θ(t), and at the merge takes the outer step on its own part of
// θ_prev and of the outer momentum; θ_prev's new values take the mean's
// place in the rule above.

// stream is the state of streaming synchronization.
type stream struct {
	fragments, overlap int
	// bounds cut the flat buffer's head into fragments: fragment p is
	// elements [bounds[p], bounds[p+1]).
	bounds []int
	flight *flight
	// inFlight sums the time from each launch to its all-reduce's end,
	// and waited the part of it the training loop waited at merges.
	inFlight, waited time.Duration
	// load is a checkpoint's flight, until Setup.
	load *flight
	// toSend turns a fragment's values at the launch, elements [lo, hi)
	// of the flat buffer, into what is averaged, and fromMean their mean
	// into the fragment's new common values, in place; nil for Local,
	// which averages the values themselves. DiLoCo averages
	// pseudo-gradients and takes an outer step on the fragment.
	toSend, fromMean func(v *tensor.Tensor, lo, hi int)
}

// flight is a fragment synchronization under way: elements [lo, hi) of
// the flat buffer, launched after step launch and merged after step merge.
type flight struct {
	lo, hi, launch, merge int
	// snap holds the fragment at the launch; stage the fragment and the
	// two consensus slots, all-reduced in place.
	snap, stage *tensor.Tensor
	done        chan struct{}
	err         error
	started     time.Time
	took        time.Duration
}

func (f *flight) release() {
	for _, t := range []*tensor.Tensor{f.snap, f.stage} {
		if t != nil {
			t.Release()
		}
	}
	f.snap, f.stage = nil, nil
}

// newStream returns the stream of opt, nil when synchronization is whole.
func newStream(opt Options, kind string) (*stream, error) {
	switch {
	case opt.Fragments < 0 || opt.Overlap < 0:
		return nil, fmt.Errorf("%s: fragments %d, overlap %d: want ≥ 0", kind, opt.Fragments, opt.Overlap)
	case opt.Fragments <= 1 && opt.Overlap == 0:
		return nil, nil
	case opt.Quantization.On():
		return nil, fmt.Errorf("%s: streaming synchronization sends float32s: drop the quantization or the fragments and overlap", kind)
	case opt.NodeSize > 0:
		return nil, fmt.Errorf("%s: streaming synchronization has one level: drop the node level or the fragments and overlap", kind)
	}
	return &stream{fragments: max(opt.Fragments, 1), overlap: opt.Overlap}, nil
}

func (st *stream) String() string {
	return fmt.Sprintf("%d fragments, overlap %d", st.fragments, st.overlap)
}

// cut lays the fragments over n elements.
func (st *stream) cut(n int) error {
	if st.fragments > n {
		return fmt.Errorf("%d fragments of %d values", st.fragments, n)
	}
	st.bounds = make([]int, st.fragments+1)
	for p := range st.bounds {
		st.bounds[p] = p * n / st.fragments
	}
	return nil
}

// due returns the elements [lo, hi) of the fragments whose synchronization
// falls after step k (1-based) of a round of h steps; lo == hi when none.
func (st *stream) due(k, h int) (lo, hi int) {
	first, last := -1, -1
	for p := range st.fragments {
		if (h*(p+1)+st.fragments-1)/st.fragments == k {
			if first < 0 {
				first = p
			}
			last = p
		}
	}
	if first < 0 {
		return 0, 0
	}
	return st.bounds[first], st.bounds[last+1]
}

// streamStep is Local's AfterStep under streaming synchronization: merge
// the synchronization in flight when it is due, launch the fragments that
// are due, and start the next round at the end of one.
func (c *core) streamStep(s *train.StepContext) error {
	end, err := c.step(s)
	if err != nil {
		return err
	}
	st := c.stream
	last := s.Step+1 >= s.TotalSteps
	lo, hi := st.due(s.Step+1-c.start, c.h)
	if f := st.flight; f != nil && (s.Step >= f.merge || hi > lo || last) {
		if err := c.merge(s); err != nil {
			return fmt.Errorf("%s: synchronization of the fragment launched at step %d, merged at step %d: %w", c.kind, f.launch+1, s.Step+1, err)
		}
	}
	if hi > lo {
		c.launch(s, lo, hi)
		if st.overlap == 0 || last {
			if err := c.merge(s); err != nil {
				return fmt.Errorf("%s: synchronization at step %d: %w", c.kind, s.Step+1, err)
			}
		}
	}
	if end {
		c.start = s.Step + 1
		if c.start < s.TotalSteps {
			c.h = Next(c.sched, s.Schedule, c.start, s.TotalSteps)
		}
	}
	if last {
		return c.FlushConsensus(s)
	}
	return nil
}

// launch starts the all-reduce of elements [lo, hi) after step s.Step.
func (c *core) launch(s *train.StepContext, lo, hi int) {
	defer c.Block(time.Now())
	c.fp.Gather()
	frag := c.flat.Slice(0, lo, hi)
	defer frag.Release()
	f := &flight{lo: lo, hi: hi, launch: s.Step, merge: s.Step + c.stream.overlap, snap: frag.Clone(),
		stage: tensor.Zeros(tensor.Shape{hi - lo + 2}, tensor.Of(c.flat.DType()), tensor.On(c.flat.Device())), done: make(chan struct{})}
	body, slots := f.stage.Slice(0, 0, hi-lo), f.stage.Slice(0, hi-lo, hi-lo+2)
	body.CopyFrom(frag)
	if c.stream.toSend != nil {
		c.stream.toSend(body, lo, hi)
	}
	c.ConsensusSlotsTensor(s, slots)
	body.Release()
	slots.Release()
	c.Synced()
	c.stream.flight = f
	f.started = time.Now()
	go func() {
		defer close(f.done)
		f.err = c.Collective("fragment all-reduce", func(ctx context.Context) error {
			return c.Meter.AllReduce(ctx, f.stage, dist.Avg)
		})
		f.took = time.Since(f.started)
	}()
}

// wait waits for the all-reduce in flight, if any, and returns its error.
func (c *core) wait() error {
	f := c.stream.flight
	if f == nil {
		return nil
	}
	<-f.done
	return f.err
}

// merge waits for the synchronization in flight and merges it into the
// parameters after step s.Step; its consensus slots stop the run here when
// a worker was interrupted at the launch.
func (c *core) merge(s *train.StepContext) error {
	st := c.stream
	f := st.flight
	start := time.Now()
	err := c.wait()
	st.waited += time.Since(start)
	c.Block(start)
	if err != nil {
		return err
	}
	st.inFlight += f.took
	st.flight = nil
	defer f.release()
	c.fp.Gather()
	mine := c.sample.Read(c.flat)
	n := f.hi - f.lo
	frag := c.flat.Slice(0, f.lo, f.hi)
	body, slots := f.stage.Slice(0, 0, n), f.stage.Slice(0, n, n+2)
	if st.fromMean != nil {
		st.fromMean(body, f.lo, f.hi)
	}
	frag.AddInPlace(body)
	frag.AddScaledInPlace(-1, f.snap)
	frag.Release()
	body.Release()
	c.fp.Scatter()
	c.TakeSlotsTensor(s, slots)
	slots.Release()
	// The distance of this worker to the mean at the launch, over the
	// fragment: what the merge moved it by.
	cd := c.sample.Distance(mine, c.sample.Read(c.flat))
	c.Pend(&train.PendingSync{Step: f.launch + 1, Epoch: s.Epoch + 1, H: c.h, LR: s.LRAt(f.launch), Dist: cd})
	return nil
}

// streamStats adds the overlap's times to a CommStats.
func (st *stream) streamStats(cs *train.CommStats) {
	cs.SyncSeconds = st.inFlight.Seconds()
	cs.SyncWaited = st.waited.Seconds()
}

// streamState returns the flight, for a checkpoint: it waits for the
// all-reduce and saves its result and the launch values.
func (c *core) streamState(ts map[string]*tensor.Tensor, sc map[string]string) {
	sc["stream"] = c.stream.String()
	f := c.stream.flight
	if f == nil {
		return
	}
	if err := c.wait(); err != nil {
		// A failed all-reduce fails the next step; the checkpoint keeps
		// no flight, and resuming from it is refused.
		sc["stream.flight"] = "failed: " + err.Error()
		return
	}
	ts["stream.stage"], ts["stream.snap"] = f.stage.Clone(), f.snap.Clone()
	sc["stream.flight"] = fmt.Sprintf("%d,%d,%d,%d,%d", f.lo, f.hi, f.launch, f.merge, f.took.Nanoseconds())
}

// loadStreamState takes a checkpoint's flight out of its tensors and
// returns the others. It runs before Setup.
func (c *core) loadStreamState(ts map[string]*tensor.Tensor, sc map[string]string) (map[string]*tensor.Tensor, error) {
	var want string
	if c.stream != nil {
		want = c.stream.String()
	}
	if sc["stream"] != want {
		return nil, fmt.Errorf("%s: the checkpoint's streaming synchronization is %q, this run's %q", c.kind, sc["stream"], want)
	}
	v := sc["stream.flight"]
	if v == "" {
		return ts, nil
	}
	if strings.HasPrefix(v, "failed: ") {
		return nil, fmt.Errorf("%s: the checkpoint was written after a synchronization failed (%s)", c.kind, strings.TrimPrefix(v, "failed: "))
	}
	var n [5]int
	parts := strings.Split(v, ",")
	if len(parts) != len(n) {
		return nil, fmt.Errorf("%s: state: stream.flight %q", c.kind, v)
	}
	for i, p := range parts {
		var err error
		if n[i], err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("%s: state: stream.flight %q: %w", c.kind, v, err)
		}
	}
	stage, ok1 := ts["stream.stage"]
	snap, ok2 := ts["stream.snap"]
	if !ok1 || !ok2 || n[0] < 0 || n[1] <= n[0] || stage.NumElements() != n[1]-n[0]+2 || snap.NumElements() != n[1]-n[0] {
		return nil, errors.New(c.kind + ": state: the synchronization in flight is incomplete")
	}
	done := make(chan struct{})
	close(done)
	c.stream.load = &flight{lo: n[0], hi: n[1], launch: n[2], merge: n[3], took: time.Duration(n[4]), stage: stage.Clone(), snap: snap.Clone(), done: done}
	rest := map[string]*tensor.Tensor{}
	for k, t := range ts {
		if k != "stream.stage" && k != "stream.snap" {
			rest[k] = t
		}
	}
	return rest, nil
}

// streamSetup lays out the fragments and puts back a checkpoint's flight.
func (c *core) streamSetup() error {
	st := c.stream
	if err := st.cut(c.fp.Elements()); err != nil {
		return fmt.Errorf("%s: %w", c.kind, err)
	}
	if f := st.load; f != nil {
		st.load = nil
		if f.hi > c.fp.Elements() {
			f.release()
			return fmt.Errorf("%s: the checkpoint's synchronization in flight ends at element %d of %d", c.kind, f.hi, c.fp.Elements())
		}
		to := func(t *tensor.Tensor) *tensor.Tensor {
			m := t.To(c.flat.Device())
			t.Release()
			return m
		}
		f.stage, f.snap = to(f.stage), to(f.snap)
		st.flight = f
	}
	return nil
}

// streamClose waits for the synchronization in flight and frees it.
func (c *core) streamClose() {
	if c.stream == nil {
		return
	}
	for _, f := range []*flight{c.stream.flight, c.stream.load} {
		if f != nil {
			<-f.done
			f.release()
		}
	}
	c.stream.flight, c.stream.load = nil, nil
}

// CommStats implements train.CommReporter: the account's counts, with the
// times of streamed synchronizations.
func (c *core) CommStats() train.CommStats {
	cs := c.CommAccount.CommStats()
	if c.stream != nil {
		c.stream.streamStats(&cs)
	}
	return cs
}
