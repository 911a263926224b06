package dist

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/flockml/flock/tensor"
)

// Peer is another rank and the weight its value carries in a neighbour
// average.
type Peer struct {
	Rank   int
	Weight float64
}

// NeighborAllReduce takes one step of gossip averaging over a weighted
// directed graph, as BlueFog's neighbor_allreduce does (Ying et al., 2021,
// "BlueFog: Make Decentralized Algorithms Practical for Optimization and
// Deep Learning"): this rank r sends t to every rank of out, receives t_j
// from every peer j of in, and sets
//
//	t ← self·t + Σ_{j ∈ in} w_j·t_j
//
// so that, when every rank calls it with its row of a mixing matrix W
// (self = w_rr, in = {(j, w_rj) : w_rj ≠ 0, j ≠ r}, out = {j : w_jr ≠ 0}),
// the ranks' tensors become W·x. The graphs of the ranks must agree: j is
// in r's out exactly when r is in j's in; a rank that waits for a message
// nobody sends fails when its Comm's timeout or ctx ends, and a message
// nobody receives would be taken by the next call with the same tag. The
// terms are added in the order self, then in's order, so a call is
// deterministic: the same on every transport.
//
// It is built on Exchange, so it runs on every Comm whose Send and Recv
// may run concurrently, posting every receive and every send at once (on
// an Exchanger, such as NCCL's, as one Exchange). It allocates a tensor
// like t per in-neighbour. The first failure cancels the other messages
// and is returned.
//
// t is a contiguous float tensor; in and out hold distinct ranks other
// than this one; the weights are finite. Anything else panics.
func NeighborAllReduce(ctx context.Context, c Comm, t *tensor.Tensor, self float64, in []Peer, out []int, tag int) error {
	checkNeighbors(c, t, self, in, out)
	return neighborAllReduce(ctx, c, t, self, in, out, tag)
}

// NeighborAllReduce issues dist.NeighborAllReduce(c, t, self, in, out, tag)
// on the queue's Comm, after the operations issued before it; t must stay
// alive until Wait, and is neither read nor written by the caller
// meanwhile. The arguments are checked, and in and out copied, at once.
func (q *Queue) NeighborAllReduce(t *tensor.Tensor, self float64, in []Peer, out []int, tag int) *Work {
	checkNeighbors(q.c, t, self, in, out)
	in, out = slices.Clone(in), slices.Clone(out)
	return q.Do(func(ctx context.Context) error { return neighborAllReduce(ctx, q.c, t, self, in, out, tag) })
}

func checkNeighbors(c Comm, t *tensor.Tensor, self float64, in []Peer, out []int) {
	if c == nil {
		panic("dist: NeighborAllReduce: nil Comm")
	}
	if t == nil || t.Released() {
		panic("dist: NeighborAllReduce: nil or released tensor")
	}
	if !t.IsContiguous() {
		panic("dist: NeighborAllReduce: non-contiguous tensor")
	}
	if !t.DType().IsFloat() {
		panic("dist: NeighborAllReduce: tensor of " + t.DType().String() + ", want a float dtype")
	}
	if math.IsNaN(self) || math.IsInf(self, 0) {
		panic("dist: NeighborAllReduce: self weight not finite")
	}
	rank, size := c.Rank(), c.Size()
	check := func(what string, r int, seen []bool) {
		if r < 0 || r >= size {
			panic(fmt.Sprintf("dist: NeighborAllReduce: %s rank %d out of [0, %d)", what, r, size))
		}
		if r == rank {
			panic(fmt.Sprintf("dist: NeighborAllReduce: rank %d lists itself as %s", rank, what))
		}
		if seen[r] {
			panic(fmt.Sprintf("dist: NeighborAllReduce: %s rank %d listed twice", what, r))
		}
		seen[r] = true
	}
	seen := make([]bool, size)
	for _, p := range in {
		check("in", p.Rank, seen)
		if math.IsNaN(p.Weight) || math.IsInf(p.Weight, 0) {
			panic(fmt.Sprintf("dist: NeighborAllReduce: weight of rank %d not finite", p.Rank))
		}
	}
	clear(seen)
	for _, r := range out {
		check("out", r, seen)
	}
}

// Message is one side of a point-to-point transfer in an Exchange: T
// goes to (or comes from) rank Peer with tag Tag.
type Message struct {
	Peer int
	T    *tensor.Tensor
	Tag  int
}

// Exchanger is implemented by Comms whose Send holds the Comm until the
// matching Recv is posted, so that concurrent sends and receives between
// two ranks could wait on one another (NCCL, where each operation runs
// alone on the communication stream). Exchange issues a set of sends and
// receives as one operation (NCCL's group calls), returning when all have
// completed; Exchange (and so NeighborAllReduce) uses it when the Comm
// offers it.
type Exchanger interface {
	Exchange(ctx context.Context, sends, recvs []Message) error
}

// exchangerOf returns c's Exchanger: c itself, or for a Meter over an
// Exchanger the Meter counting its Exchange as the Sends and Recvs it
// holds; ok is false when c has none.
func exchangerOf(c Comm) (x Exchanger, ok bool) {
	if m, isMeter := c.(*Meter); isMeter {
		if x, ok := m.Comm.(Exchanger); ok {
			return meteredExchange{m, x}, true
		}
		return nil, false
	}
	x, ok = c.(Exchanger)
	return x, ok
}

func neighborAllReduce(ctx context.Context, c Comm, t *tensor.Tensor, self float64, in []Peer, out []int, tag int) error {
	bufs := make([]*tensor.Tensor, len(in))
	for i := range bufs {
		bufs[i] = tensor.EmptyLike(t)
	}
	defer func() {
		for _, b := range bufs {
			b.Release()
		}
	}()
	sends := make([]Message, len(out))
	for i, r := range out {
		sends[i] = Message{Peer: r, T: t, Tag: tag}
	}
	recvs := make([]Message, len(in))
	for i, p := range in {
		recvs[i] = Message{Peer: p.Rank, T: bufs[i], Tag: tag}
	}
	if err := Exchange(ctx, c, sends, recvs); err != nil {
		return err
	}
	combine(t, self, in, bufs)
	return nil
}

// Exchange sends every message of sends and fills every tensor of recvs
// with the message from its Peer carrying its Tag, all at once, and
// returns when all have completed: as one Exchange on a Comm that is an
// Exchanger (or a Meter over one), otherwise each Send and Recv on its own
// goroutine, so that ranks that send to each other never wait on one
// another whether or not the transport buffers a Send whose Recv is not
// posted yet (in-process ranks and TCP do, for any size), and a receive
// posted first lets TCP read straight into its buffer. It therefore needs
// a Comm whose Send and Recv may run concurrently (NewLocal's and
// DialTCP's can); a transport that runs one operation at a time and holds
// a Send until its Recv is posted may deadlock on large tensors. The first
// failure cancels the other messages and is returned.
func Exchange(ctx context.Context, c Comm, sends, recvs []Message) error {
	if x, ok := exchangerOf(c); ok {
		return x.Exchange(ctx, sends, recvs)
	}
	// No deadline is added: without one each transport applies its own
	// timeout.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	for _, m := range recvs {
		wg.Go(func() {
			if err := c.Recv(ctx, m.T, m.Peer, m.Tag); err != nil {
				fail(err)
			}
		})
	}
	for _, m := range sends {
		wg.Go(func() {
			if err := c.Send(ctx, m.T, m.Peer, m.Tag); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return first
}

// combine sets t ← self·t + Σ_i in[i].Weight·bufs[i], in that order.
func combine(t *tensor.Tensor, self float64, in []Peer, bufs []*tensor.Tensor) {
	if self != 1 {
		t.MulScalarInPlace(self)
	}
	for i, p := range in {
		if p.Weight != 1 {
			bufs[i].MulScalarInPlace(p.Weight)
		}
		t.AddInPlace(bufs[i])
	}
}
