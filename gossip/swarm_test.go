package gossip_test

import (
	"bytes"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/gossip"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// swarmStub is a Swarm worker without a Trainer: one parameter of n
// elements, moved by the test between steps.
type swarmStub struct {
	w *gossip.Swarm
	s *train.StepContext
}

// newSwarmStubs sets up k Swarm workers over in-process Comms with opt
// (its Topology, when nil, the fully connected graph), their parameter
// starting at rank 0's values init (Setup broadcasts them).
func newSwarmStubs(t *testing.T, k, steps int, opt gossip.SwarmOptions, init []float32) []swarmStub {
	t.Helper()
	if opt.Topology == nil {
		opt.Topology = gossip.Full(k)
	}
	comms := dist.NewLocal(k)
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	stubs := make([]swarmStub, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r, c := range comms {
		w, err := gossip.NewSwarm(c, opt)
		if err != nil {
			t.Fatal(err)
		}
		v := tensor.FromSlice(slices.Clone(init), tensor.Shape{len(init)})
		s := &train.StepContext{TotalSteps: steps, StepsPerEpoch: steps, Params: []nn.NamedParameter{{Name: "x", Param: autograd.Param(v)}}}
		stubs[r] = swarmStub{w, s}
		t.Cleanup(w.Close)
		wg.Go(func() { errs[r] = w.Setup(s) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return stubs
}

func (w swarmStub) get() []float32 { return w.s.Params[0].Param.Value.Float32s() }

func (w swarmStub) set(v []float32) {
	src := tensor.FromSlice(v, tensor.Shape{len(v)})
	w.s.Params[0].Param.Value.CopyFrom(src)
	src.Release()
}

// runSwarm runs every stub's steps in its own goroutine, calling move
// (when not nil) before each step's AfterStep, as a local step would.
func runSwarm(t *testing.T, stubs []swarmStub, move func(rank, step int, x []float32)) {
	t.Helper()
	errs := make([]error, len(stubs))
	var wg sync.WaitGroup
	for r, w := range stubs {
		wg.Go(func() {
			for i := range w.s.TotalSteps {
				if move != nil {
					x := w.get()
					move(r, i, x)
					w.set(x)
				}
				w.s.Step = i
				if errs[r] = w.w.AfterStep(w.s); errs[r] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// distinct gives every rank its own starting values, integers below 64.
func distinct(stubs []swarmStub, n int) {
	for r, w := range stubs {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((r*7 + i*3) % 64)
		}
		w.set(v)
	}
}

// sums returns Σ_r x_r per coordinate, in float64.
func sums(stubs []swarmStub) []float64 {
	var s []float64
	for _, w := range stubs {
		x := w.get()
		if s == nil {
			s = make([]float64, len(x))
		}
		for i, v := range x {
			s[i] += float64(v)
		}
	}
	return s
}

// TestSwarmKeepsSumAndConverges runs Swarm without gradients in each
// form: pairwise averaging without quantization keeps Σ_i X_i (up to
// float32 rounding, far below what one lost half-step would change), and
// repeated pairings take every worker to the mean. Two workers in the
// asynchronous forms ask each other at once on most steps, which must
// neither deadlock nor count twice.
func TestSwarmKeepsSumAndConverges(t *testing.T) {
	for _, tt := range []struct {
		name string
		k    int
		opt  gossip.SwarmOptions
	}{
		{"blocking", 8, gossip.SwarmOptions{LocalSteps: 1}},
		{"blocking/2", 2, gossip.SwarmOptions{LocalSteps: 1}},
		{"blocking/ring", 6, gossip.SwarmOptions{Topology: gossip.Ring(6), LocalSteps: 1, Geometric: true}},
		{"non-blocking", 8, gossip.SwarmOptions{LocalSteps: 1, NonBlocking: true}},
		{"non-blocking/2", 2, gossip.SwarmOptions{LocalSteps: 1, NonBlocking: true}},
		{"sequential", 8, gossip.SwarmOptions{LocalSteps: 2, Sequential: true, Geometric: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const n = 37
			stubs := newSwarmStubs(t, tt.k, 300, tt.opt, make([]float32, n))
			distinct(stubs, n)
			before := sums(stubs)
			// A pause stands for each step's computation, so that the
			// workers advance at about the same pace, as they do in
			// training; without it the fastest would finish before the
			// others had started.
			runSwarm(t, stubs, func(int, int, []float32) { time.Sleep(100 * time.Microsecond) })
			after := sums(stubs)
			for i := range before {
				if math.Abs(after[i]-before[i]) > 1e-4 {
					t.Fatalf("coordinate %d: Σ X_i went from %v to %v", i, before[i], after[i])
				}
			}
			for r, w := range stubs {
				for i, v := range w.get() {
					// From up to 63 apart: a worker that finishes first
					// leaves the others a little way from the mean.
					if mean := before[i] / float64(tt.k); math.Abs(float64(v)-mean) > 1e-2 {
						t.Fatalf("rank %d coordinate %d: %v after 300 steps, mean %v", r, i, v, mean)
					}
				}
				st := w.w.CommStats()
				if st.Syncs == 0 || st.Sent == 0 || st.Received == 0 {
					t.Fatalf("rank %d: stats %+v", r, st)
				}
				// The pairs' spread is not a consensus distance: no
				// collective measures one.
				if st.Consensus != 0 || !(st.PairDistance > 0) {
					t.Fatalf("rank %d: consensus %v, pair distance %v: want 0 and > 0", r, st.Consensus, st.PairDistance)
				}
				if l := w.w.Lost(); len(l) > 0 {
					t.Fatalf("rank %d lost partners %v", r, l)
				}
			}
		})
	}
}

// TestSwarmQuantized exchanges 8-bit models while each worker drifts
// between its interactions, as local steps make it: no decode wraps
// unseen (every coordinate stays within the quantizer's error of the
// true mean's neighbourhood), the sum moves by no more than the
// quantization errors, and the workers still converge.
func TestSwarmQuantized(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  gossip.SwarmOptions
	}{
		{"blocking", gossip.SwarmOptions{LocalSteps: 1, QuantBits: 8}},
		{"non-blocking", gossip.SwarmOptions{LocalSteps: 2, QuantBits: 8, NonBlocking: true}},
		{"sequential", gossip.SwarmOptions{LocalSteps: 1, QuantBits: 4, Sequential: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const k, n, steps = 4, 500, 200
			stubs := newSwarmStubs(t, k, steps, tt.opt, make([]float32, n))
			distinct(stubs, n)
			// Each worker drifts by a decaying step, as SGD with a
			// decaying rate would.
			rngs := make([]*rand.Rand, k)
			for r := range rngs {
				rngs[r] = rand.New(rand.NewPCG(uint64(r), 9))
			}
			var drift [k]float64
			runSwarm(t, stubs, func(r, i int, x []float32) {
				time.Sleep(100 * time.Microsecond)
				size := 0.5 * math.Pow(0.98, float64(i))
				for j := range x {
					d := float32(size * (2*rngs[r].Float64() - 1))
					x[j] += d
					drift[r] += float64(d) / n
				}
			})
			var spread float64
			ref := stubs[0].get()
			for _, w := range stubs[1:] {
				for i, v := range w.get() {
					spread = max(spread, math.Abs(float64(v-ref[i])))
				}
			}
			// They started up to 63 apart; the last steps move each
			// coordinate by up to 0.009, a 4-bit grid's error is a few
			// times that, and a worker may go several steps without an
			// interaction when the scheduler (or the race detector) holds
			// its partners back. A decode off by a wrap would be off by
			// q·s, far more.
			if spread > 0.5 {
				t.Fatalf("workers differ by up to %v after %d steps", spread, steps)
			}
			var quantized bool
			var violations, fallbacks int
			for r, w := range stubs {
				c := w.w.Counts()
				violations += c.Violations
				fallbacks += c.Fallbacks
				st := w.w.CommStats()
				full := 5*8 + 4*n // a message at full precision
				if st.Syncs > 1 && st.Sent < st.Collectives*int64(full)*3/4 {
					quantized = true
				}
				if l := w.w.Lost(); len(l) > 0 {
					t.Fatalf("rank %d lost partners %v", r, l)
				}
			}
			if !quantized {
				t.Fatal("no worker sent quantized models")
			}
			if violations != fallbacks {
				t.Fatalf("%d violations, %d requests resent at full precision: want one for each", violations, fallbacks)
			}
		})
	}
}

// TestSwarmQuantizedBytes checks the bytes of a quantized exchange
// against the quantizer's message size: two workers interact at every
// step of the sequential form, rank 0 asking; the first request goes at
// full precision (nothing yet bounds the spread), the later ones as
// 8-bit codes, answered in kind.
func TestSwarmQuantizedBytes(t *testing.T) {
	const n, steps = 1000, 5
	stubs := newSwarmStubs(t, 2, steps, gossip.SwarmOptions{LocalSteps: 1, QuantBits: 8, Sequential: true}, make([]float32, n))
	distinct(stubs, n)
	runSwarm(t, stubs, func(r, i int, x []float32) {
		for j := range x {
			x[j] += float32(0.01 * float64((j*13+i*7+r)%5-2))
		}
	})
	const header = 5 * 8
	words := func(b int) int64 { return int64(4 * ((b + 3) / 4)) }
	q := words(gossip.Quantizer{Bits: 8, Scale: 1}.EncodedSize(n))
	full := int64(4 * n)
	// Rank 0: 5 requests (the first at full precision) and 2 goodbyes'
	// worth of headers; rank 1: 5 answers (the first at full precision).
	st0, st1 := stubs[0].w.CommStats(), stubs[1].w.CommStats()
	want0 := header + full + 4*(header+q) + header
	want1 := header + full + 4*(header+q) + header
	if st0.Sent != want0 || st1.Sent != want1 {
		t.Fatalf("sent %d and %d bytes, want %d and %d (quantized message %d bytes)", st0.Sent, st1.Sent, want0, want1, q)
	}
	if st0.Received != st1.Sent || st1.Received != st0.Sent {
		t.Fatalf("received %d and %d, sent %d and %d", st0.Received, st1.Received, st0.Sent, st1.Sent)
	}
	if st0.Syncs != steps || st1.Syncs != steps {
		t.Fatalf("%d and %d interactions, want %d", st0.Syncs, st1.Syncs, steps)
	}
}

// TestSwarmSequentialIsReproducible trains the MLP twice with the
// sequential form and the same seed: every worker ends with the same
// bits; another seed gives other models.
func TestSwarmSequentialIsReproducible(t *testing.T) {
	data := bands(96, 8, 8, 1)
	cfg := smallConfig(4)
	mk := func(seed uint64, bits int) func(dist.Comm) train.Strategy {
		return func(c dist.Comm) train.Strategy {
			w, err := gossip.NewSwarm(c, gossip.SwarmOptions{Topology: gossip.Ring(4), LocalSteps: 2, Geometric: true, Sequential: true, QuantBits: bits, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			return &stepWatch{Strategy: w}
		}
	}
	for _, bits := range []int{0, 8} {
		a := runK(t, cfg, data, 4, nil, mk(1, bits), 0, "")
		b := runK(t, cfg, data, 4, nil, mk(1, bits), 0, "")
		c := runK(t, cfg, data, 4, nil, mk(2, bits), 0, "")
		for r := range a {
			if !nntest.Equal(a[r].final, b[r].final) {
				t.Fatalf("bits %d rank %d: two runs with one seed differ by %g", bits, r, nntest.MaxDiff(a[r].final, b[r].final))
			}
			if nntest.Equal(a[r].final, c[r].final) {
				t.Fatalf("bits %d rank %d: seeds 1 and 2 give the same model", bits, r)
			}
			if a[r].stats.Syncs == 0 {
				t.Fatalf("bits %d rank %d: no interaction", bits, r)
			}
		}
	}
}

// TestSwarmDropsSilentPartner stops one of three workers after two steps
// without a word — for good, or for longer than the timeout before it
// goes on: the others drop it when it does not answer within the
// timeout, say so in the log, ignore what it sends later, and finish.
func TestSwarmDropsSilentPartner(t *testing.T) {
	for _, pause := range []time.Duration{0, 600 * time.Millisecond} {
		var logs bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
		const k, n, steps = 3, 16, 40
		stubs := newSwarmStubs(t, k, steps, gossip.SwarmOptions{LocalSteps: 1, Timeout: 200 * time.Millisecond, Logger: log}, make([]float32, n))
		distinct(stubs, n)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for r, w := range stubs {
			wg.Go(func() {
				for i := range steps {
					if r == 2 && i == 2 {
						if pause == 0 {
							return // silent from now on, its pairs still open
						}
						time.Sleep(pause)
					}
					time.Sleep(time.Millisecond) // a step's computation
					w.s.Step = i
					if errs[r] = w.w.AfterStep(w.s); errs[r] != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("pause %v: rank %d: %v", pause, r, err)
			}
		}
		if pause > 0 {
			continue // whether a partner met it while it paused depends on timing
		}
		for r := range 2 {
			if l := stubs[r].w.Lost(); !slices.Equal(l, []int{2}) {
				t.Fatalf("rank %d lost %v, want [2]", r, l)
			}
		}
		mu.Lock()
		if !strings.Contains(logs.String(), "partner lost") || !strings.Contains(logs.String(), "partner=2") {
			t.Fatalf("the log does not report the lost partner:\n%s", logs.String())
		}
		mu.Unlock()
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestSwarmOptions checks the options NewSwarm refuses and the names it
// gives.
func TestSwarmOptions(t *testing.T) {
	c := dist.NewLocal(4)
	defer func() {
		for _, x := range c {
			x.Close()
		}
	}()
	for _, opt := range []gossip.SwarmOptions{
		{},
		{Topology: gossip.Ring(5)},
		{Topology: gossip.OnePeerExponential(4)},
		{Topology: gossip.Ring(4), LocalSteps: -1},
		{Topology: gossip.Ring(4), QuantBits: 17},
		{Topology: gossip.Ring(4), Timeout: -time.Second},
	} {
		if _, err := gossip.NewSwarm(c[0], opt); err == nil {
			t.Errorf("%+v: no error", opt)
		}
	}
	w, err := gossip.NewSwarm(c[0], gossip.SwarmOptions{Topology: gossip.Ring(4), LocalSteps: 4, NonBlocking: true, QuantBits: 8})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.String(), "Swarm SGD over the ring, 4 nodes, H = 4, non-blocking, 8-bit exchanges"; got != want {
		t.Errorf("name %q, want %q", got, want)
	}
}
