package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// SwarmOptions configure Swarm SGD.
type SwarmOptions struct {
	// Topology is the graph whose edges are the possible partners: a
	// static one (ring, mesh, torus, exp, sym-exp, full), with a node per
	// rank, taken as undirected — nodes i and j are partners when either
	// sends to the other, so the static exponential graph gives the
	// symmetric one's partners (required).
	Topology Topology
	// LocalSteps is H: a worker takes H local steps between two of its
	// interactions (0 means 1).
	LocalSteps int
	// Geometric draws each worker's number of local steps anew before
	// every interaction, geometric with mean H (support 1, 2, …).
	Geometric bool
	// NonBlocking: the initiator of an interaction sends its model and
	// goes on computing; the answer is applied at a later step, on top of
	// the updates taken meanwhile. Blocking (the default): the initiator
	// waits for the answer, and both end the interaction at their mean.
	NonBlocking bool
	// QuantBits sends models with the lattice Quantizer at that many bits
	// per coordinate (1 to 16); 0 sends them at full precision.
	QuantBits int
	// Sequential runs the paper's Algorithm 1: a random edge, drawn from
	// Seed, interacts at each tick, so that the run is reproducible
	// whatever the timing; the workers wait for the partners the
	// sequence gives them.
	Sequential bool
	// Seed draws the partners, the geometric step counts, the sequential
	// schedule and the quantizer's checksum key.
	Seed uint64
	// Timeout is how long an initiator waits for its partner's answer
	// before it drops the partner from its partner set (and how long a
	// finishing worker waits for its partners' goodbyes); 0 means one
	// minute.
	Timeout time.Duration
	// Logger receives a line for every partner lost; nil means
	// slog.Default().
	Logger *slog.Logger
	// Context bounds the setup's collectives; nil means
	// context.Background.
	Context context.Context
}

// Swarm is Swarm SGD (Nadiradze, Sabour, Davies, Li and
// Alistarh, 2021, "Asynchronous Decentralized SGD with Quantized and Local
// Updates") as a train.Strategy: no global rounds; each worker takes H
// local steps of its optimizer, then averages its parameters with one
// partner drawn uniformly among its neighbours in the topology that are
// still in the run. Momentum, other optimizer state and batch norm's
// running statistics stay local.
//
// # An interaction
//
// The initiator i sends its parameters X_i (a snapshot) to its partner j.
// j, at its next step boundary, answers with its own X_j and moves by
// half the difference, X_j ← X_j + (X_i − X_j)/2; i, on the answer, moves
// by X_i ← X_i + (X_j − X_i^sent)/2. The two moves cancel, so without
// quantization the sum of the models is kept: blocking, i waits and
// both end at (X_i + X_j)/2; non-blocking, i has gone on with its local
// steps since it sent, and ends at the mean of the two exchanged models
// plus its own updates taken meanwhile — nobody waits for a partner to
// finish computing. Workers serve their partners' requests at every step
// boundary, also while they wait for an answer of their own, so cycles of
// waiting workers cannot deadlock; when two workers ask each other at
// once, the request of the lower rank goes through and the other is
// withdrawn, on both sides without a message.
//
// # Quantization
//
// With QuantBits = b a model goes out as b bits a coordinate (Quantizer)
// plus a checksum, and is decoded against the receiver's own model. The
// request's scale comes from what the initiator knows — the distance it
// moved since its last interaction and the spread of the models it last
// met — and a decode that wraps is caught by the checksum: it is counted
// as a violation, answered with a refusal, and the initiator resends its
// snapshot at full precision (a fallback). The answer's scale is exact:
// the partner knows the decoded request, within half a step of the
// initiator's snapshot, against which the answer is decoded.
//
// # Faults and the end of the run
//
// Each pair of neighbours talks over a Comm of its own (dist.Pairs), so a
// partner that dies fails only its pairs: its neighbours log the loss,
// drop it from their partner sets and go on. A partner that stays silent
// past Timeout while a worker waits for it is dropped the same way. A
// worker that finishes its steps says goodbye to its partners, which
// answer in kind and stop asking it.
//
// # Accounting
//
// Syncs counts the interactions a worker took part in (as initiator or
// partner), Sent and Received the messages' bytes (an 8-byte header each,
// and a model at full precision or Quantizer.EncodedSize), Blocked the
// time spent in interactions — waiting, encoding, decoding and averaging
// — and Compute the time between them. PairDistance is the mean pair
// distance ‖X_i − X_j‖ / ‖X_i‖ seen at this worker's interactions: the
// models' spread as the pairs see it, without a global collective (it is
// not the consensus distance that the other strategies report).
//
// Evaluation sees the evaluating worker's own model: Swarm has no moment
// at which the workers could be averaged. Checkpoints are not supported:
// the workers are at different steps when a run is stopped.
type Swarm struct {
	comm dist.Comm
	opt  SwarmOptions
	ctx  context.Context
	log  *slog.Logger
	h    int

	optName   string
	gradBytes int64
	// The parameters, end to end in host memory (x is its slice): the
	// pairs' Comms are TCP ones.
	*train.FlatParams
	x     []float32 // flat's elements
	ref   []float32 // the model right after this worker's last interaction
	qz    Quantizer // Scale set per message
	rng   *rand.Rand
	plan  *swarmPlan // sequential mode
	tick  swarmTick  // sequential: this worker's next interaction
	stash []swarmEvent

	pairs   map[int]dist.Comm
	live    []int // partners still in the run, ascending
	events  chan swarmEvent
	stopRcv context.CancelFunc
	rcv     sync.WaitGroup
	byeTo   map[int]bool // partners this worker said goodbye to
	byeFrom map[int]bool // partners that said goodbye
	lost    map[int]bool // partners dropped for failing or staying silent
	done    bool

	out      *swarmRequest // the request awaiting its answer
	seq      int64
	since    int     // local steps since the last interaction
	target   int     // local steps before the next one
	spread   float64 // ‖X_i − X_j‖∞ before the last interaction
	qerr     float64 // how far that interaction's quantization may have left the pair apart
	lastStep time.Time

	// Accounting.
	st swarmStats
}

// swarmStats are a worker's counts.
type swarmStats struct {
	initiated, served, violations, fallbacks, lost int
	sent, msgs, dpBytes                            int64
	recv                                           atomic.Int64 // added by the receivers
	blocked, compute                               time.Duration
	distSum                                        float64
	distN                                          int
	setup                                          dist.Traffic
}

// swarmRequest is an interaction this worker initiated.
type swarmRequest struct {
	peer  int
	seq   int64
	snap  []float32 // X_i as sent
	scale float64   // the step it was quantized at (0: full precision)
}

// Message kinds.
const (
	swarmReq   = 1 // a model, asking for the partner's
	swarmReply = 2 // the partner's model
	swarmNack  = 3 // the request's decode wrapped: resend at full precision
	swarmBye   = 4 // this worker has finished
)

// swarmHeaderLen is the int64 header of a message: kind, seq, bits (0:
// full precision), payload float32 words, the scale's float64 bits.
const swarmHeaderLen = 5

// swarmTag tags every message of a pair.
const swarmTag = 0x737761 // "swa"

// swarmEvent is a message, or the failure of a pair, as a pair's receiver
// hands it to the worker.
type swarmEvent struct {
	from    int
	kind    int
	seq     int64
	bits    int
	scale   float64
	payload []float32
	err     error
}

var (
	_ train.Strategy     = (*Swarm)(nil)
	_ train.CommReporter = (*Swarm)(nil)
	_ fmt.Stringer       = (*Swarm)(nil)
)

// NewSwarm returns Swarm SGD over c.
func NewSwarm(c dist.Comm, opt SwarmOptions) (*Swarm, error) {
	if c == nil {
		return nil, errors.New("swarm: nil Comm")
	}
	t := opt.Topology
	if t == nil {
		return nil, errors.New("swarm: no topology")
	}
	if n := t.Nodes(); n != c.Size() {
		return nil, fmt.Errorf("swarm: topology of %d nodes for %d workers", n, c.Size())
	}
	if t.Period() != 1 {
		return nil, fmt.Errorf("swarm: the %s changes over time; Swarm draws its partners from a static graph", t)
	}
	if opt.LocalSteps < 0 {
		return nil, fmt.Errorf("swarm: %d local steps, want ≥ 0", opt.LocalSteps)
	}
	if opt.QuantBits < 0 || opt.QuantBits > 16 {
		return nil, fmt.Errorf("swarm: %d quantization bits, want 0 (full precision) to 16", opt.QuantBits)
	}
	if opt.Timeout < 0 {
		return nil, fmt.Errorf("swarm: negative timeout %v", opt.Timeout)
	}
	if opt.Timeout == 0 {
		opt.Timeout = time.Minute
	}
	ctx := opt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	rank := uint64(c.Rank())
	w := &Swarm{
		comm: c, opt: opt, ctx: ctx, log: log, h: max(opt.LocalSteps, 1),
		qz:      Quantizer{Bits: max(opt.QuantBits, 1), Scale: 1, Key: opt.Seed ^ 0x5157a9e5},
		rng:     rand.New(rand.NewPCG(opt.Seed, 0x73776172<<32|rank)),
		byeTo:   map[int]bool{},
		byeFrom: map[int]bool{},
		lost:    map[int]bool{},
	}
	return w, nil
}

// String names the strategy: "Swarm SGD over the ring of 8 nodes, H = 4,
// non-blocking, 8-bit exchanges".
func (w *Swarm) String() string {
	name := "Swarm SGD"
	if w.optName != "" && w.optName != "SGD" {
		name = "Swarm " + w.optName
	}
	s := name + " over the " + w.opt.Topology.String()
	if w.opt.Geometric {
		s += fmt.Sprintf(", H geometric with mean %d", w.h)
	} else {
		s += fmt.Sprintf(", H = %d", w.h)
	}
	switch {
	case w.opt.Sequential:
		s += ", sequential"
	case w.opt.NonBlocking:
		s += ", non-blocking"
	}
	if w.opt.QuantBits > 0 {
		s += fmt.Sprintf(", %d-bit exchanges", w.opt.QuantBits)
	}
	return s
}

// Lost returns the partners this worker dropped because they failed or
// stayed silent, ascending.
func (w *Swarm) Lost() []int {
	var l []int
	for p := range w.lost {
		l = append(l, p)
	}
	slices.Sort(l)
	return l
}

// edges returns the topology's edges, undirected, ascending.
func (w *Swarm) edges() [][2]int {
	seen := map[[2]int]bool{}
	var e [][2]int
	for i := range w.opt.Topology.Nodes() {
		_, out := w.opt.Topology.Out(0, i)
		for _, l := range out {
			k := [2]int{min(i, l.Node), max(i, l.Node)}
			if l.Node != i && !seen[k] {
				seen[k] = true
				e = append(e, k)
			}
		}
	}
	slices.SortFunc(e, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	return e
}

// Setup implements train.Strategy: it copies rank 0's parameters and
// buffers to the other workers, lays the parameters out in one buffer and
// opens a Comm per neighbour (dist.Pairs).
func (w *Swarm) Setup(s *train.StepContext) error {
	if w.FlatParams != nil {
		return errors.New("swarm: Setup called twice")
	}
	if s.Step != 0 {
		return errors.New("swarm: resuming a run is not supported")
	}
	w.optName = optim.Name(s.Optimizer)
	var err error
	var params []nn.NamedParameter
	if params, w.gradBytes, err = train.Trainable(s.Params); err != nil {
		return fmt.Errorf("swarm: %w", err)
	}
	if dt := params[0].Param.Value.DType(); dt != tensor.Float32 {
		return fmt.Errorf("swarm: parameters are %v; Swarm exchanges float32 models", dt)
	}
	meter := dist.NewMeter(w.comm)
	ctx, cancel := dist.WithDefaultTimeout(w.ctx, dist.DefaultTimeout)
	defer cancel()
	if err := train.BroadcastModel(ctx, meter, s); err != nil {
		return fmt.Errorf("swarm: setup: %w", err)
	}
	w.st.setup = meter.Traffic()
	// The pairs' Comms are TCP ones and Swarm works on flat as a Go
	// slice: flat lives in host memory.
	if w.FlatParams, err = train.NewFlatParams(nil, params, nil, 0); err != nil {
		return fmt.Errorf("swarm: %w", err)
	}
	x, ok := tensor.HostFloat32s(w.Flat)
	if !ok {
		return errors.New("swarm: the parameters' buffer is not host float32")
	}
	w.x = x
	if w.opt.QuantBits > 0 {
		w.ref = slices.Clone(w.x)
	}
	pairs, err := dist.Pairs(ctx, w.comm, w.edges())
	if err != nil {
		return fmt.Errorf("swarm: setup: %w", err)
	}
	w.pairs = pairs
	for p := range pairs {
		w.live = append(w.live, p)
	}
	slices.Sort(w.live)
	w.events = make(chan swarmEvent, 4*len(pairs)+4)
	rctx, stop := context.WithCancel(context.Background())
	w.stopRcv = stop
	for p, c := range pairs {
		w.rcv.Add(1)
		go w.receive(rctx, p, c)
	}
	if w.opt.Sequential {
		w.plan = newSwarmPlan(w.edges(), w.opt.Topology.Nodes(), s.TotalSteps, w.h, w.opt.Geometric, w.opt.Seed)
		w.tick = w.plan.next(w.comm.Rank())
		w.target = w.tick.h
	} else {
		w.target = w.drawH()
	}
	w.lastStep = time.Now()
	return nil
}

// drawH returns the number of local steps before the next interaction.
func (w *Swarm) drawH() int {
	if !w.opt.Geometric {
		return w.h
	}
	return geometric(w.rng, w.h)
}

// geometric draws from the geometric distribution on 1, 2, … with mean h.
func geometric(r *rand.Rand, h int) int {
	if h <= 1 {
		return 1
	}
	p := 1 / float64(h)
	u := 1 - r.Float64() // (0, 1]
	return 1 + int(math.Floor(math.Log(u)/math.Log1p(-p)))
}

// pairRank returns the rank of peer in its pair with this worker.
func (w *Swarm) pairRank(peer int) int {
	if peer < w.comm.Rank() {
		return 0
	}
	return 1
}

// receive reads the messages of one pair and hands them to the worker,
// until a goodbye, a failure or the end of the run.
func (w *Swarm) receive(ctx context.Context, peer int, c dist.Comm) {
	defer w.rcv.Done()
	from := w.pairRank(peer)
	hdr := tensor.Zeros(tensor.Shape{swarmHeaderLen}, tensor.Of(tensor.Int64), tensor.On(dist.DeviceOf(c)))
	defer hdr.Release()
	// No deadline: a partner may rightly say nothing for long; a dead one
	// fails the pair (its heartbeat stops), and the run's end cancels ctx.
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(100*365*24*time.Hour))
	defer cancel()
	hand := func(ev swarmEvent) bool {
		select {
		case w.events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		if err := c.Recv(ctx, hdr, from, swarmTag); err != nil {
			if ctx.Err() == nil {
				hand(swarmEvent{from: peer, err: err})
			}
			return
		}
		w.st.recv.Add(swarmHeaderLen * 8)
		h := hdr.Int64s()
		ev := swarmEvent{from: peer, kind: int(h[0]), seq: h[1], bits: int(h[2]), scale: math.Float64frombits(uint64(h[4]))}
		if n := h[3]; n > 0 {
			if n > int64(len(w.x))+8 {
				hand(swarmEvent{from: peer, err: fmt.Errorf("message of %d words for a model of %d", n, len(w.x))})
				return
			}
			t := tensor.Zeros(tensor.Shape{int(n)}, tensor.On(dist.DeviceOf(c)))
			err := c.Recv(ctx, t, from, swarmTag)
			if err == nil {
				ev.payload = t.Float32s()
				w.st.recv.Add(4 * n)
			}
			t.Release()
			if err != nil {
				if ctx.Err() == nil {
					hand(swarmEvent{from: peer, err: err})
				}
				return
			}
		}
		if !hand(ev) || ev.kind == swarmBye {
			return
		}
	}
}

// send sends a message to peer: the header, then the payload if any.
func (w *Swarm) send(peer, kind int, seq int64, bits int, scale float64, payload []float32) error {
	c := w.pairs[peer]
	ctx, cancel := context.WithTimeout(w.ctx, w.opt.Timeout)
	defer cancel()
	h := []int64{int64(kind), seq, int64(bits), int64(len(payload)), int64(math.Float64bits(scale))}
	ht := tensor.FromSlice(h, tensor.Shape{swarmHeaderLen}, tensor.On(dist.DeviceOf(c)))
	err := c.Send(ctx, ht, w.pairRank(peer), swarmTag)
	ht.Release()
	w.st.msgs++
	w.st.sent += swarmHeaderLen * 8
	if err == nil && len(payload) > 0 {
		pt := tensor.FromSlice(payload, tensor.Shape{len(payload)}, tensor.On(dist.DeviceOf(c)))
		err = c.Send(ctx, pt, w.pairRank(peer), swarmTag)
		pt.Release()
		w.st.sent += int64(4 * len(payload))
	}
	return err
}

// encode returns the payload carrying x: x itself at full precision
// (scale 0), or its quantized codes packed into float32 words.
func (w *Swarm) encode(x []float32, scale float64) []float32 {
	if scale == 0 {
		return x
	}
	qz := w.qz
	qz.Scale = scale
	return packWords(qz.Encode(x))
}

// decode returns the model a payload carries, decoded against ref when
// quantized; violated reports a wrapped decode.
func (w *Swarm) decode(ev swarmEvent, ref []float32) (x []float32, violated bool, err error) {
	if ev.bits == 0 {
		if len(ev.payload) != len(ref) {
			return nil, false, fmt.Errorf("model of %d coordinates, want %d", len(ev.payload), len(ref))
		}
		return ev.payload, false, nil
	}
	if ev.bits != w.opt.QuantBits || !(ev.scale > 0) || math.IsInf(ev.scale, 0) {
		return nil, false, fmt.Errorf("quantized at %d bits, scale %g; this run uses %d bits", ev.bits, ev.scale, w.opt.QuantBits)
	}
	qz := w.qz
	qz.Scale = ev.scale
	msg := unpackWords(ev.payload)
	if need := qz.EncodedSize(len(ref)); len(msg) < need || len(msg) > need+3 {
		return nil, false, fmt.Errorf("quantized message of %d bytes, want %d", len(msg), need)
	}
	out := make([]float32, len(ref))
	violated, err = qz.Decode(msg[:qz.EncodedSize(len(ref))], ref, out)
	return out, violated, err
}

// packWords puts b into float32 words, little-endian, the last one
// zero-padded.
func packWords(b []byte) []float32 {
	out := make([]float32, (len(b)+3)/4)
	for i := range out {
		var u uint32
		for j := range 4 {
			if k := 4*i + j; k < len(b) {
				u |= uint32(b[k]) << (8 * j)
			}
		}
		out[i] = math.Float32frombits(u)
	}
	return out
}

// unpackWords is packWords' inverse (with the padding).
func unpackWords(w []float32) []byte {
	out := make([]byte, 4*len(w))
	for i, f := range w {
		u := math.Float32bits(f)
		for j := range 4 {
			out[4*i+j] = byte(u >> (8 * j))
		}
	}
	return out
}

// maxDiff returns ‖a − b‖∞.
func maxDiff(a, b []float32) float64 {
	var m float64
	for i, v := range a {
		m = max(m, math.Abs(float64(v)-float64(b[i])))
	}
	return m
}

// pairStats returns ‖a − b‖∞ and ‖a − b‖ / ‖b‖, in one pass.
func pairStats(a, b []float32) (maxAbs, rel float64) {
	var d2, n2 float64
	for i, v := range b {
		e := float64(a[i]) - float64(v)
		maxAbs = max(maxAbs, math.Abs(e))
		d2 += e * e
		n2 += float64(v) * float64(v)
	}
	if n2 == 0 {
		return maxAbs, 0
	}
	return maxAbs, math.Sqrt(d2 / n2)
}

// requestScale returns the grid step of a request, or 0 for full
// precision: from the distance the model moved since its last
// interaction, the spread last seen (the partner moved by as much, and
// differed by about that spread) and the error the last quantized
// exchange may have left, with a margin. The first request of a run,
// with nothing to go by, goes at full precision.
func (w *Swarm) requestScale() float64 {
	if w.opt.QuantBits == 0 || w.spread == 0 {
		return 0
	}
	bound := 2*(2*maxDiff(w.x, w.ref)+w.spread) + 2*w.qerr
	if !(bound > 0) || math.IsInf(bound, 0) {
		return 0
	}
	return ScaleFor(w.opt.QuantBits, bound)
}

// interacted records the end of an interaction whose two models were
// spread apart in the largest coordinate and d in relative distance,
// sent and received at the grid steps given (0: full precision).
func (w *Swarm) interacted(s *train.StepContext, spread, d, sent, recv float64) {
	w.spread = spread
	w.st.distSum += d
	w.st.distN++
	w.qerr = (sent + recv) / 2
	h := w.since
	w.since = 0
	p := train.PendingSync{Step: s.Step + 1, Epoch: s.Epoch + 1, H: h, LR: s.LR}
	p.Emit(s, w.stats())
}

// settled notes the model right after an interaction, from which the
// next request measures how far it moved.
func (w *Swarm) settled() {
	if w.opt.QuantBits > 0 {
		copy(w.ref, w.x)
	}
}

// average moves x by half of (other − base): x ← x + (other − base)/2.
func (w *Swarm) average(other, base []float32) {
	for i, v := range other {
		w.x[i] += (v - base[i]) / 2
	}
}

// AfterBackward implements train.Strategy; gradients stay local.
func (w *Swarm) AfterBackward(*train.StepContext) error { return nil }

// AfterStep implements train.Strategy: it serves the partners' requests
// that arrived during the step, and after the round's local steps starts
// an interaction (and, blocking, waits for its answer).
func (w *Swarm) AfterStep(s *train.StepContext) error {
	if w.FlatParams == nil {
		return errors.New("swarm: AfterStep before Setup")
	}
	now := time.Now()
	w.st.compute += now.Sub(w.lastStep)
	defer func() {
		w.lastStep = time.Now()
		w.st.blocked += w.lastStep.Sub(now)
	}()
	w.st.dpBytes += dist.AllReduceBytes(w.gradBytes, w.comm.Size())
	w.since++
	last := s.Step+1 >= s.TotalSteps
	w.Gather()
	defer w.Scatter()
	var err error
	if w.opt.Sequential {
		err = w.sequentialStep(s)
	} else {
		err = w.asyncStep(s, last)
	}
	if err == nil && last {
		err = w.finish(s)
	}
	return err
}

// asyncStep is a step boundary of the asynchronous forms.
func (w *Swarm) asyncStep(s *train.StepContext, last bool) error {
	if err := w.drain(s); err != nil {
		return err
	}
	if last || w.out != nil || w.since < w.target || len(w.live) == 0 {
		return nil
	}
	w.target = w.drawH()
	w.seq++
	w.request(w.live[w.rng.IntN(len(w.live))], w.seq)
	if w.opt.NonBlocking {
		return nil
	}
	return w.await(s)
}

// request sends this worker's model to peer, asking for its.
func (w *Swarm) request(peer int, seq int64) {
	r := &swarmRequest{peer: peer, seq: seq, snap: slices.Clone(w.x), scale: w.requestScale()}
	w.out = r
	w.st.initiated++
	if err := w.send(peer, swarmReq, r.seq, w.bitsOf(r.scale), r.scale, w.encode(r.snap, r.scale)); err != nil {
		w.unreachable(peer, err)
	}
}

// bitsOf returns the header's bits for a payload quantized at scale.
func (w *Swarm) bitsOf(scale float64) int {
	if scale == 0 {
		return 0
	}
	return w.opt.QuantBits
}

// drain handles the messages that arrived, without waiting.
func (w *Swarm) drain(s *train.StepContext) error {
	for {
		select {
		case ev := <-w.events:
			if err := w.handle(s, ev); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// await handles messages until the pending request is answered, or its
// partner dropped.
func (w *Swarm) await(s *train.StepContext) error {
	if w.out == nil {
		return nil
	}
	timer := time.NewTimer(w.opt.Timeout)
	defer timer.Stop()
	for w.out != nil {
		select {
		case ev := <-w.events:
			if err := w.handle(s, ev); err != nil {
				return err
			}
		case <-timer.C:
			w.drop(w.out.peer, fmt.Errorf("no answer within %v", w.opt.Timeout))
		}
	}
	return nil
}

// handle acts on one event.
func (w *Swarm) handle(s *train.StepContext, ev swarmEvent) error {
	if ev.err != nil {
		if !w.byeFrom[ev.from] {
			w.drop(ev.from, ev.err)
		}
		return nil
	}
	switch ev.kind {
	case swarmBye:
		w.byeFrom[ev.from] = true
		w.remove(ev.from)
		if !w.byeTo[ev.from] {
			w.byeTo[ev.from] = true
			if err := w.send(ev.from, swarmBye, 0, 0, 0, nil); err != nil {
				w.log.Debug("swarm: goodbye", "rank", w.comm.Rank(), "partner", ev.from, "err", err)
			}
		}
	case swarmReq:
		if w.byeTo[ev.from] || !slices.Contains(w.live, ev.from) {
			return nil // said goodbye: the partner withdraws its request
		}
		if w.out != nil && w.out.peer == ev.from {
			if w.comm.Rank() < ev.from {
				return nil // both asked: this worker's request stands
			}
			w.out = nil // both asked: the partner's request stands
		}
		return w.serve(s, ev)
	case swarmReply:
		r := w.out
		if r == nil || r.peer != ev.from || r.seq != ev.seq {
			return w.stale(ev)
		}
		other, violated, err := w.decode(ev, r.snap)
		if err != nil || violated {
			// The partner chose the answer's scale to decode exactly: a
			// wrap here is a corrupted message; the exchange is lost.
			w.st.violations++
			w.out = nil
			w.log.Warn("swarm: answer not decoded; exchange abandoned", "rank", w.comm.Rank(), "partner", ev.from, "err", err)
			return nil
		}
		w.out = nil
		spread, d := pairStats(other, r.snap)
		w.interacted(s, spread, d, r.scale, ev.scale)
		w.average(other, r.snap)
		w.settled()
	case swarmNack:
		r := w.out
		if r == nil || r.peer != ev.from || r.seq != ev.seq {
			return w.stale(ev)
		}
		w.st.fallbacks++
		r.scale = 0
		if err := w.send(r.peer, swarmReq, r.seq, 0, 0, r.snap); err != nil {
			w.unreachable(r.peer, err)
		}
	default:
		return fmt.Errorf("swarm: rank %d: message of kind %d from rank %d", w.comm.Rank(), ev.kind, ev.from)
	}
	return nil
}

// stale checks an answer or refusal that matches no pending request: one
// from a partner already out of the partner set (dropped after a timeout,
// or unreachable) is late and ignored; any other is a protocol error.
func (w *Swarm) stale(ev swarmEvent) error {
	if w.lost[ev.from] || !slices.Contains(w.live, ev.from) {
		return nil
	}
	return fmt.Errorf("swarm: rank %d: message %d of kind %d from rank %d matches no request", w.comm.Rank(), ev.seq, ev.kind, ev.from)
}

// serve answers a partner's request and moves halfway towards it.
func (w *Swarm) serve(s *train.StepContext, ev swarmEvent) error {
	other, violated, err := w.decode(ev, w.x)
	if err != nil {
		return fmt.Errorf("swarm: rank %d: request from rank %d: %w", w.comm.Rank(), ev.from, err)
	}
	if violated {
		w.st.violations++
		if err := w.send(ev.from, swarmNack, ev.seq, 0, 0, nil); err != nil {
			w.unreachable(ev.from, err)
		}
		return nil
	}
	spread, d := pairStats(other, w.x)
	scale := 0.0
	if ev.bits > 0 {
		// The initiator decodes against its snapshot, within s/2 of other.
		bound := spread + ev.scale/2
		bound += bound * 1e-6
		if bound > 0 && !math.IsInf(bound, 0) {
			scale = ScaleFor(w.opt.QuantBits, bound)
		}
	}
	if err := w.send(ev.from, swarmReply, ev.seq, w.bitsOf(scale), scale, w.encode(w.x, scale)); err != nil {
		w.unreachable(ev.from, err)
		return nil
	}
	w.st.served++
	w.interacted(s, spread, d, scale, ev.scale)
	w.average(other, w.x)
	w.settled()
	return nil
}

// remove takes peer out of the partner set and withdraws a request to it.
func (w *Swarm) remove(peer int) {
	if i := slices.Index(w.live, peer); i >= 0 {
		w.live = slices.Delete(w.live, i, i+1)
	}
	if w.out != nil && w.out.peer == peer {
		w.out = nil
	}
}

// drop removes a partner that failed, and says so.
func (w *Swarm) drop(peer int, err error) {
	if w.byeFrom[peer] || w.lost[peer] {
		return
	}
	w.lost[peer] = true
	w.remove(peer)
	w.st.lost++
	w.log.Warn("swarm: partner lost; training goes on without it",
		"rank", w.comm.Rank(), "partner", peer, "partners_left", len(w.live), "err", err)
	if c := w.pairs[peer]; c != nil {
		c.Close()
	}
}

// unreachable takes out of the partner set a partner a message could
// not reach. Whether it left or failed, its pair's receiver tells: a
// goodbye before the pair closed, or the pair's failure, which drop
// reports.
func (w *Swarm) unreachable(peer int, err error) {
	w.log.Debug("swarm: send failed", "rank", w.comm.Rank(), "partner", peer, "err", err)
	w.remove(peer)
}

// finish ends this worker's part: it waits for its pending request, says
// goodbye to its partners and waits for theirs.
func (w *Swarm) finish(s *train.StepContext) error {
	if err := w.await(s); err != nil {
		return err
	}
	w.done = true
	for _, p := range slices.Clone(w.live) {
		if w.byeTo[p] {
			continue
		}
		w.byeTo[p] = true
		if err := w.send(p, swarmBye, 0, 0, 0, nil); err != nil {
			w.unreachable(p, err)
		}
	}
	timer := time.NewTimer(w.opt.Timeout)
	defer timer.Stop()
	for len(w.live) > 0 {
		select {
		case ev := <-w.events:
			switch {
			case ev.err != nil:
				w.drop(ev.from, ev.err)
			case ev.kind == swarmBye:
				w.byeFrom[ev.from] = true
				w.remove(ev.from)
			}
		case <-timer.C:
			for _, p := range slices.Clone(w.live) {
				w.drop(p, fmt.Errorf("no goodbye within %v", w.opt.Timeout))
			}
		}
	}
	w.closePairs()
	return nil
}

// sequentialStep is a step boundary of the sequential form: after the
// local steps of this worker's next tick, it interacts with the tick's
// partner, the lower rank initiating, and waits for that exchange alone.
func (w *Swarm) sequentialStep(s *train.StepContext) error {
	for {
		select {
		case ev := <-w.events:
			if err := w.takeSequential(s, ev, swarmTick{}); err != nil {
				return err
			}
			continue
		default:
		}
		break
	}
	if !w.tick.ok || w.since < w.target {
		return nil
	}
	t := w.tick
	w.tick = w.plan.next(w.comm.Rank())
	err := w.exchange(s, t)
	w.since, w.target = 0, w.tick.h
	return err
}

// takeSequential handles an event that belongs to tick t, a goodbye or a
// failure, and keeps any other for its own tick.
func (w *Swarm) takeSequential(s *train.StepContext, ev swarmEvent, t swarmTick) error {
	if ev.err != nil || ev.kind == swarmBye || t.ok && ev.from == t.peer && ev.seq == int64(t.tick) {
		return w.handle(s, ev)
	}
	w.stash = append(w.stash, ev)
	return nil
}

// exchange runs the interaction of tick t.
func (w *Swarm) exchange(s *train.StepContext, t swarmTick) error {
	if !slices.Contains(w.live, t.peer) {
		return nil
	}
	var done func() bool
	if w.comm.Rank() < t.peer {
		w.request(t.peer, int64(t.tick))
		done = func() bool { return w.out == nil }
	} else {
		served := w.st.served
		done = func() bool { return w.st.served > served || !slices.Contains(w.live, t.peer) }
	}
	timer := time.NewTimer(w.opt.Timeout)
	defer timer.Stop()
	for !done() {
		if i := slices.IndexFunc(w.stash, func(e swarmEvent) bool { return e.from == t.peer && e.seq == int64(t.tick) }); i >= 0 {
			ev := w.stash[i]
			w.stash = slices.Delete(w.stash, i, i+1)
			if err := w.handle(s, ev); err != nil {
				return err
			}
			continue
		}
		select {
		case ev := <-w.events:
			if err := w.takeSequential(s, ev, t); err != nil {
				return err
			}
		case <-timer.C:
			w.drop(t.peer, fmt.Errorf("tick %d: no message within %v", t.tick, w.opt.Timeout))
		}
	}
	return nil
}

// swarmTick is an interaction of the sequential form: at global tick
// tick, with partner peer, after h local steps.
type swarmTick struct {
	peer, h, tick int
	ok            bool
}

// swarmPlan draws the sequential form's ticks: at each, an edge uniformly
// at random and, geometric, each end's number of local steps. A tick
// takes place when both ends have that many steps left in the run;
// otherwise it is skipped. Every worker draws the same sequence from the
// seed and keeps every worker's count of steps used, so all agree on
// which ticks take place.
type swarmPlan struct {
	edges     [][2]int
	adj       [][]int
	used      []int
	total, h  int
	geometric bool
	rng       *rand.Rand
	t         int
}

func newSwarmPlan(edges [][2]int, n, total, h int, geometric bool, seed uint64) *swarmPlan {
	adj := make([][]int, n)
	for _, e := range edges {
		adj[e[0]] = append(adj[e[0]], e[1])
		adj[e[1]] = append(adj[e[1]], e[0])
	}
	return &swarmPlan{edges: edges, adj: adj, used: make([]int, n), total: total, h: h, geometric: geometric,
		rng: rand.New(rand.NewPCG(seed, 0x73657175))}
}

// next returns node i's next tick, or one with ok false when it will
// have none.
func (p *swarmPlan) next(i int) swarmTick {
	hmin := p.h
	if p.geometric {
		hmin = 1
	}
	for len(p.edges) > 0 {
		if p.total-p.used[i] < hmin || !slices.ContainsFunc(p.adj[i], func(j int) bool { return p.total-p.used[j] >= hmin }) {
			break
		}
		e := p.edges[p.rng.IntN(len(p.edges))]
		ha, hb := p.h, p.h
		if p.geometric {
			ha, hb = geometric(p.rng, p.h), geometric(p.rng, p.h)
		}
		t := p.t
		p.t++
		if p.used[e[0]]+ha > p.total || p.used[e[1]]+hb > p.total {
			continue
		}
		p.used[e[0]] += ha
		p.used[e[1]] += hb
		switch i {
		case e[0]:
			return swarmTick{peer: e[1], h: ha, tick: t, ok: true}
		case e[1]:
			return swarmTick{peer: e[0], h: hb, tick: t, ok: true}
		}
	}
	return swarmTick{}
}

// closePairs stops the receivers and closes the pairs' Comms.
func (w *Swarm) closePairs() {
	if w.stopRcv == nil {
		return
	}
	w.stopRcv()
	for _, c := range w.pairs {
		c.Close()
	}
	w.rcv.Wait()
	w.stopRcv = nil
}

// stats returns the accounting so far.
func (w *Swarm) stats() train.CommStats {
	c := train.CommStats{
		Sent: w.st.sent, Received: w.st.recv.Load(), Collectives: w.st.msgs,
		Blocked: w.st.blocked.Seconds(), Compute: w.st.compute.Seconds(),
		Syncs:             int64(w.st.initiated + w.st.served),
		SetupBytes:        w.st.setup.Sent + w.st.setup.Received,
		DataParallelBytes: w.st.dpBytes,
	}
	if w.st.distN > 0 {
		c.PairDistance = w.st.distSum / float64(w.st.distN)
	}
	return c
}

// SwarmCounts are a worker's interactions by outcome.
type SwarmCounts struct {
	// Initiated and Served count the interactions this worker asked for
	// and those it answered.
	Initiated, Served int
	// Violations counts the quantized decodes that wrapped (caught by the
	// checksum), Fallbacks the requests then resent at full precision.
	Violations, Fallbacks int
	// Lost counts the partners dropped for failing or staying silent.
	Lost int
}

// Counts returns the worker's interactions by outcome.
func (w *Swarm) Counts() SwarmCounts {
	return SwarmCounts{Initiated: w.st.initiated, Served: w.st.served, Violations: w.st.violations, Fallbacks: w.st.fallbacks, Lost: w.st.lost}
}

// CommStats implements train.CommReporter.
func (w *Swarm) CommStats() train.CommStats { return w.stats() }

// WorkersApart implements train.IndependentWorkers: no collective brings
// Swarm's workers together.
func (w *Swarm) WorkersApart() {}

// Close says goodbye to the partners still in the run (a worker stopped
// early), closes the pairs and frees the buffers; the world Comm stays
// open, owned by the caller.
func (w *Swarm) Close() {
	if w.stopRcv != nil && !w.done {
		for _, p := range w.live {
			if !w.byeTo[p] {
				w.byeTo[p] = true
				w.send(p, swarmBye, 0, 0, 0, nil)
			}
		}
	}
	w.closePairs()
	if w.FlatParams != nil {
		w.FlatParams.Release()
	}
	w.x = nil
}
