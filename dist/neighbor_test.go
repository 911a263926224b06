package dist_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// graph is a mixing matrix, w[i][j] the weight of rank j's value in rank
// i's new one.
type graph [][]float64

// rows returns rank r's arguments to NeighborAllReduce: its self weight,
// in-neighbours with weights and out-neighbours.
func (g graph) rows(r int) (self float64, in []dist.Peer, out []int) {
	for j := range g {
		if j == r {
			continue
		}
		if g[r][j] != 0 {
			in = append(in, dist.Peer{Rank: j, Weight: g[r][j]})
		}
		if g[j][r] != 0 {
			out = append(out, j)
		}
	}
	return g[r][r], in, out
}

// apply returns W·x in float64, x[r] being rank r's vector.
func (g graph) apply(x [][]float64) [][]float64 {
	y := make([][]float64, len(x))
	for i := range g {
		y[i] = make([]float64, len(x[i]))
		for j, w := range g[i] {
			for e, v := range x[j] {
				y[i][e] += w * v
			}
		}
	}
	return y
}

// circulant returns the n×n matrix with w[i][(i+o) mod n] = weights[k]
// for the offsets o = offsets[k], and self weight self.
func circulant(n int, self float64, offsets []int, weights []float64) graph {
	g := make(graph, n)
	for i := range g {
		g[i] = make([]float64, n)
		g[i][i] = self
		for k, o := range offsets {
			g[i][((i+o)%n+n)%n] += weights[k]
		}
	}
	return g
}

// transports builds k connected ranks in process or over loopback TCP.
var transports = []struct {
	name string
	make func(t *testing.T, k int) []dist.Comm
}{
	{"local", func(t *testing.T, k int) []dist.Comm {
		cs := dist.NewLocal(k)
		t.Cleanup(func() { closeAll(cs) })
		return cs
	}},
	{"tcp", func(t *testing.T, k int) []dist.Comm { return tcpFactory(t, k) }},
}

func randomVectors(k, n int, seed uint64) [][]float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	x := make([][]float64, k)
	for i := range x {
		x[i] = make([]float64, n)
		for e := range x[i] {
			x[i][e] = r.NormFloat64()
		}
	}
	return x
}

// mix runs steps NeighborAllReduce calls of g on every rank of cs, from
// the vectors x in dtype dt, and returns the ranks' results.
func mix(t *testing.T, cs []dist.Comm, g graph, x [][]float64, dt tensor.DType, steps int) [][]float64 {
	t.Helper()
	out := make([][]float64, len(cs))
	errs := ranks(cs, func(r int, c dist.Comm) error {
		x64 := tensor.FromSlice(x[r], tensor.Shape{len(x[r])})
		v := x64.Cast(dt)
		x64.Release()
		defer v.Release()
		self, in, to := g.rows(r)
		for range steps {
			if err := dist.NeighborAllReduce(context.Background(), c, v, self, in, to, 3); err != nil {
				return err
			}
		}
		out[r] = v.Float64s()
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out
}

func closeTo(t *testing.T, what string, got, want [][]float64, tol float64) {
	t.Helper()
	for r := range want {
		for e, w := range want[r] {
			if d := math.Abs(got[r][e] - w); d > tol*(1+math.Abs(w)) || math.IsNaN(got[r][e]) {
				t.Fatalf("%s: rank %d element %d: %v, want %v", what, r, e, got[r][e], w)
			}
		}
	}
}

// TestNeighborAllReduce checks one step on a ring and on a directed
// exponential graph with uneven weights (rows and columns not summing to
// one) against the matrix product, on both transports, for messages
// below and well above 64 KiB.
func TestNeighborAllReduce(t *testing.T) {
	graphs := map[string]graph{
		"ring/5":        circulant(5, 0.5, []int{1, -1}, []float64{0.3, 0.2}),
		"exponential/6": circulant(6, 0.1, []int{1, 2, 4}, []float64{0.5, -0.25, 0.7}),
		"pair/2":        {{0.25, 0.75}, {0.6, 0.4}},
		"alone/1":       {{0.5}},
	}
	for _, tr := range transports {
		for name, g := range graphs {
			for _, n := range []int{1, 1000, 70_000} {
				for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
					if dt == tensor.Float64 && n != 1000 {
						continue
					}
					t.Run(fmt.Sprintf("%s/%s/n=%d/%v", tr.name, name, n, dt), func(t *testing.T) {
						x := randomVectors(len(g), n, uint64(n))
						got := mix(t, tr.make(t, len(g)), g, x, dt, 1)
						tol := 1e-6
						if dt == tensor.Float64 {
							tol = 1e-14
						}
						closeTo(t, "W·x", got, g.apply(x), tol)
					})
				}
			}
		}
	}
}

// TestNeighborAllReducePreservesAverage mixes with the doubly stochastic
// static exponential graph on 8 ranks: the ranks' average stays, their
// spread around it shrinks by ρ = 1/2 per step at most.
func TestNeighborAllReducePreservesAverage(t *testing.T) {
	const k, n, steps = 8, 100, 4
	g := circulant(k, 0.25, []int{1, 2, 4}, []float64{0.25, 0.25, 0.25})
	x := randomVectors(k, n, 1)
	got := mix(t, dist.NewLocal(k), g, x, tensor.Float64, steps)
	want := x
	for range steps {
		want = g.apply(want)
	}
	closeTo(t, "W⁴·x", got, want, 1e-13)
	spread := func(x [][]float64) float64 {
		s := 0.0
		for e := range n {
			mean := 0.0
			for r := range k {
				mean += x[r][e] / k
			}
			for r := range k {
				s += (x[r][e] - mean) * (x[r][e] - mean)
			}
		}
		return math.Sqrt(s)
	}
	for e := range n {
		var before, after float64
		for r := range k {
			before += x[r][e]
			after += got[r][e]
		}
		if math.Abs(before-after) > 1e-12*k {
			t.Fatalf("element %d: sum over ranks %v before mixing, %v after", e, before, after)
		}
	}
	if s0, s := spread(x), spread(got); s > s0/16*(1+1e-9) {
		t.Errorf("spread %v after %d steps from %v, want at most ρ⁴ = 1/16 of it", s, steps, s0)
	}
}

// rendezvous is a Comm whose Send returns only once the receiver has
// taken the message, as a transport without buffering would.
type rendezvous struct{ dist.Comm }

const ackTag = 1 << 20

func (c rendezvous) Send(ctx context.Context, t *tensor.Tensor, to, tag int) error {
	if err := c.Comm.Send(ctx, t, to, tag); err != nil {
		return err
	}
	ack := tensor.Zeros(tensor.Shape{1})
	defer ack.Release()
	return c.Comm.Recv(ctx, ack, to, tag+ackTag)
}

func (c rendezvous) Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error {
	if err := c.Comm.Recv(ctx, t, from, tag); err != nil {
		return err
	}
	ack := tensor.Zeros(tensor.Shape{1})
	defer ack.Release()
	return c.Comm.Send(ctx, ack, from, tag+ackTag)
}

// TestNeighborAllReduceUnbufferedSends runs a ring over a Comm whose Send
// waits for its Recv: sending to both neighbours before receiving would
// deadlock (checked first, with a short timeout); NeighborAllReduce must
// not.
func TestNeighborAllReduceUnbufferedSends(t *testing.T) {
	const k = 4
	g := circulant(k, 1.0/3, []int{1, -1}, []float64{1.0 / 3, 1.0 / 3})
	wrap := func(cs []dist.Comm) []dist.Comm {
		out := make([]dist.Comm, len(cs))
		for i, c := range cs {
			out[i] = rendezvous{c}
		}
		return out
	}
	cs := dist.NewLocal(k)
	defer closeAll(cs)
	errs := ranks(wrap(cs), func(r int, c dist.Comm) error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		v := tensor.Zeros(tensor.Shape{10})
		defer v.Release()
		for _, to := range []int{(r + 1) % k, (r + k - 1) % k} {
			if err := c.Send(ctx, v, to, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if errs[0] == nil {
		t.Fatal("sending before receiving did not deadlock: the wrapper buffers")
	}
	x := randomVectors(k, 50, 2)
	got := mix(t, wrap(dist.NewLocal(k)), g, x, tensor.Float32, 2)
	closeTo(t, "W²·x", got, g.apply(g.apply(x)), 1e-6)
}

// TestNeighborAllReduceQueue issues two steps through a Queue without
// waiting in between.
func TestNeighborAllReduceQueue(t *testing.T) {
	const k = 4
	g := circulant(k, 0.5, []int{1}, []float64{0.5})
	x := randomVectors(k, 300, 3)
	cs := dist.NewLocal(k)
	defer closeAll(cs)
	got := make([][]float64, k)
	errs := ranks(cs, func(r int, c dist.Comm) error {
		q := dist.NewQueue(context.Background(), c)
		defer q.Close()
		v := tensor.FromSlice(x[r], tensor.Shape{len(x[r])})
		defer v.Release()
		self, in, out := g.rows(r)
		w1 := q.NeighborAllReduce(v, self, in, out, 0)
		w2 := q.NeighborAllReduce(v, self, in, out, 0)
		if err := errors.Join(w1.Wait(context.Background()), w2.Wait(context.Background())); err != nil {
			return err
		}
		got[r] = v.Float64s()
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	closeTo(t, "W²·x", got, g.apply(g.apply(x)), 1e-13)
}

// TestNeighborAllReduceDeadPeer checks that a rank that closed its Comm,
// or never takes part, makes its neighbours fail, promptly, rather than
// hang.
func TestNeighborAllReduceDeadPeer(t *testing.T) {
	const k, victim = 4, 2
	g := circulant(k, 0.5, []int{1, 2}, []float64{0.25, 0.25})
	for _, tr := range transports {
		for _, closed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/closed=%v", tr.name, closed), func(t *testing.T) {
				cs := tr.make(t, k)
				start := time.Now()
				errs := ranks(cs, func(r int, c dist.Comm) error {
					if r == victim {
						if closed {
							return c.Close()
						}
						return nil
					}
					ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
					defer cancel()
					v := tensor.Ones(tensor.Shape{1000})
					defer v.Release()
					self, in, out := g.rows(r)
					return dist.NeighborAllReduce(ctx, c, v, self, in, out, 0)
				})
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("the failure took %v to surface", d)
				}
				for r, err := range errs {
					if r == victim {
						continue
					}
					// Ranks 0 and 1 receive from rank 2; rank 3 only sends
					// to it, which may succeed into its buffers.
					if _, in, _ := g.rows(r); err == nil && hasPeer(in, victim) {
						t.Errorf("rank %d: no error with rank %d dead", r, victim)
					}
					var oe *dist.OpError
					if closed && err != nil && !(errors.As(err, &oe) && oe.Rank == victim) {
						t.Errorf("rank %d: %v, want an OpError naming rank %d", r, err, victim)
					}
				}
			})
		}
	}
}

func hasPeer(ps []dist.Peer, r int) bool {
	for _, p := range ps {
		if p.Rank == r {
			return true
		}
	}
	return false
}

// TestNeighborAllReducePanics checks that wrong arguments panic, in the
// call and when issued through a Queue.
func TestNeighborAllReducePanics(t *testing.T) {
	cs := dist.NewLocal(3)
	defer closeAll(cs)
	f := tensor.Zeros(tensor.Shape{4})
	defer f.Release()
	ints := tensor.Zeros(tensor.Shape{4}, tensor.Of(tensor.Int32))
	defer ints.Release()
	for _, tt := range []struct {
		name string
		t    *tensor.Tensor
		in   []dist.Peer
		out  []int
	}{
		{"itself in", f, []dist.Peer{{Rank: 0, Weight: 1}}, nil},
		{"itself out", f, nil, []int{0}},
		{"twice in", f, []dist.Peer{{Rank: 1, Weight: 1}, {Rank: 1, Weight: 1}}, nil},
		{"twice out", f, nil, []int{2, 2}},
		{"out of range", f, nil, []int{3}},
		{"NaN weight", f, []dist.Peer{{Rank: 1, Weight: math.NaN()}}, nil},
		{"int tensor", ints, nil, nil},
	} {
		for _, queued := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/queued=%v", tt.name, queued), func(t *testing.T) {
				q := dist.NewQueue(context.Background(), cs[0])
				defer q.Close()
				defer func() {
					if recover() == nil {
						t.Errorf("no panic")
					}
				}()
				if queued {
					q.NeighborAllReduce(tt.t, 1, tt.in, tt.out, 0)
				} else {
					dist.NeighborAllReduce(context.Background(), cs[0], tt.t, 1, tt.in, tt.out, 0)
				}
			})
		}
	}
}

// serial is a Comm that runs one Send or Recv at a time and whose Send
// waits for its Recv, as NCCL's does; its Exchange issues a set of
// messages together, as an NCCL group does.
type serial struct {
	rendezvous
	mu        *sync.Mutex
	exchanges *atomic.Int64
}

func (c serial) Send(ctx context.Context, t *tensor.Tensor, to, tag int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rendezvous.Send(ctx, t, to, tag)
}

func (c serial) Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rendezvous.Recv(ctx, t, from, tag)
}

func (c serial) Exchange(ctx context.Context, sends, recvs []dist.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exchanges.Add(1)
	errs := make([]error, len(sends)+len(recvs))
	var wg sync.WaitGroup
	for i, m := range sends {
		wg.Go(func() { errs[i] = c.rendezvous.Send(ctx, m.T, m.Peer, m.Tag) })
	}
	for i, m := range recvs {
		wg.Go(func() { errs[len(sends)+i] = c.rendezvous.Recv(ctx, m.T, m.Peer, m.Tag) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestNeighborAllReduceExchanger runs a ring over Comms that run one
// operation at a time with unbuffered sends, where concurrent Sends and
// Recvs can wait on one another: NeighborAllReduce must use their
// Exchange, also through a Meter, which counts the messages as the Sends
// and Recvs of a Comm without Exchange; and give W·x.
func TestNeighborAllReduceExchanger(t *testing.T) {
	const k = 4
	g := circulant(k, 1.0/3, []int{1, -1}, []float64{1.0 / 3, 1.0 / 3})
	var n atomic.Int64
	wrap := func(cs []dist.Comm) []dist.Comm {
		out := make([]dist.Comm, len(cs))
		for i, c := range cs {
			out[i] = serial{rendezvous{c}, new(sync.Mutex), &n}
		}
		return out
	}
	x := randomVectors(k, 50, 3)
	got := mix(t, wrap(dist.NewLocal(k)), g, x, tensor.Float32, 2)
	closeTo(t, "W²·x", got, g.apply(g.apply(x)), 1e-6)
	if n.Load() != 2*k {
		t.Errorf("%d exchanges, want %d", n.Load(), 2*k)
	}

	n.Store(0)
	metered := wrap(dist.NewLocal(k))
	plain := dist.NewLocal(k)
	for i := range metered {
		metered[i] = dist.NewMeter(metered[i])
		plain[i] = dist.NewMeter(plain[i])
	}
	got = mix(t, metered, g, x, tensor.Float32, 2)
	closeTo(t, "W²·x through Meters", got, g.apply(g.apply(x)), 1e-6)
	if n.Load() != 2*k {
		t.Errorf("through Meters: %d exchanges, want %d", n.Load(), 2*k)
	}
	mix(t, plain, g, x, tensor.Float32, 2)
	for r := range k {
		a, b := metered[r].(*dist.Meter).Traffic(), plain[r].(*dist.Meter).Traffic()
		if a.Sent != b.Sent || a.Received != b.Received || a.Ops != b.Ops {
			t.Errorf("rank %d: a Meter over Exchange counted %+v, over Send and Recv %+v", r, a, b)
		}
	}
}
