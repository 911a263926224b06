package dist

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/flockml/flock/tensor"
)

// Traffic counts what one rank's collectives moved.
type Traffic struct {
	// Sent and Received are payload bytes under the ring algorithms (see
	// Meter), the same whatever transport carried them.
	Sent, Received int64
	// Ops is the number of collectives and messages issued.
	Ops int64
	// Time is the wall time spent inside those operations.
	Time time.Duration
}

// Add returns t + u.
func (t Traffic) Add(u Traffic) Traffic {
	return Traffic{t.Sent + u.Sent, t.Received + u.Received, t.Ops + u.Ops, t.Time + u.Time}
}

// Sub returns t − u: the traffic between two readings.
func (t Traffic) Sub(u Traffic) Traffic {
	return Traffic{t.Sent - u.Sent, t.Received - u.Received, t.Ops - u.Ops, t.Time - u.Time}
}

// Meter is a Comm that counts the traffic of the Comm it wraps. Bytes are
// those the bandwidth-optimal ring algorithms move per rank, for a tensor
// of S bytes over n ranks (the cost model of NCCL's and Gloo's large
// messages, and of every communication-efficiency paper):
//
//	AllReduce       sent = received = 2(n−1)/n · S
//	ReduceScatter   sent = received = (n−1)/n · S        (S: the source)
//	AllGather       sent = received = (n−1)/n · S        (S: the result)
//	Broadcast       root sends S, every other rank receives S
//	Send / Recv     S sent / S received
//	Barrier         nothing
//
// so that strategies are compared by what the algorithm needs, not by how
// one transport happens to move it (in-process ranks move nothing over a
// wire; a small all-reduce over TCP uses recursive doubling). A Meter is
// safe for use by a Queue's goroutine and a reader at once.
type Meter struct {
	Comm
	sent, received, ops, nanos atomic.Int64
}

var _ Comm = (*Meter)(nil)

// NewMeter returns a Meter over c.
func NewMeter(c Comm) *Meter {
	if c == nil {
		panic("dist: NewMeter with a nil Comm")
	}
	return &Meter{Comm: c}
}

// Device implements Placed: the wrapped Comm's device, nil (host tensors)
// when it has none.
func (m *Meter) Device() tensor.Device {
	if p, ok := m.Comm.(Placed); ok {
		return p.Device()
	}
	return nil
}

// Traffic returns the counts so far.
func (m *Meter) Traffic() Traffic {
	return Traffic{m.sent.Load(), m.received.Load(), m.ops.Load(), time.Duration(m.nanos.Load())}
}

// AllReduceBytes returns the bytes each of n ranks sends (and receives) in
// a ring all-reduce of size bytes.
func AllReduceBytes(size int64, n int) int64 {
	if n <= 1 {
		return 0
	}
	return 2 * int64(n-1) * size / int64(n)
}

func (m *Meter) count(sent, received int64, start time.Time) {
	m.sent.Add(sent)
	m.received.Add(received)
	m.ops.Add(1)
	m.nanos.Add(int64(time.Since(start)))
}

func nbytes(t *tensor.Tensor) int64 {
	return int64(t.NumElements() * t.DType().Size())
}

// AllReduce implements Comm.
func (m *Meter) AllReduce(ctx context.Context, t *tensor.Tensor, op ReduceOp) error {
	start := time.Now()
	err := m.Comm.AllReduce(ctx, t, op)
	b := AllReduceBytes(nbytes(t), m.Size())
	m.count(b, b, start)
	return err
}

// ReduceScatter implements Comm.
func (m *Meter) ReduceScatter(ctx context.Context, dst, src *tensor.Tensor, op ReduceOp) error {
	start := time.Now()
	err := m.Comm.ReduceScatter(ctx, dst, src, op)
	n := int64(m.Size())
	b := (n - 1) * nbytes(src) / n
	m.count(b, b, start)
	return err
}

// AllGather implements Comm.
func (m *Meter) AllGather(ctx context.Context, dst, src *tensor.Tensor) error {
	start := time.Now()
	err := m.Comm.AllGather(ctx, dst, src)
	n := int64(m.Size())
	b := (n - 1) * nbytes(dst) / n
	m.count(b, b, start)
	return err
}

// Broadcast implements Comm.
func (m *Meter) Broadcast(ctx context.Context, t *tensor.Tensor, root int) error {
	start := time.Now()
	err := m.Comm.Broadcast(ctx, t, root)
	var sent, received int64
	if m.Size() > 1 {
		if m.Rank() == root {
			sent = nbytes(t)
		} else {
			received = nbytes(t)
		}
	}
	m.count(sent, received, start)
	return err
}

// Barrier implements Comm.
func (m *Meter) Barrier(ctx context.Context) error {
	start := time.Now()
	err := m.Comm.Barrier(ctx)
	m.count(0, 0, start)
	return err
}

// Send implements Comm.
func (m *Meter) Send(ctx context.Context, t *tensor.Tensor, to, tag int) error {
	start := time.Now()
	err := m.Comm.Send(ctx, t, to, tag)
	m.count(nbytes(t), 0, start)
	return err
}

// Recv implements Comm.
func (m *Meter) Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error {
	start := time.Now()
	err := m.Comm.Recv(ctx, t, from, tag)
	m.count(0, nbytes(t), start)
	return err
}

// meteredExchange is the Exchange of the Comm a Meter wraps, counted as
// its Sends and Recvs would be.
type meteredExchange struct {
	m *Meter
	x Exchanger
}

func (e meteredExchange) Exchange(ctx context.Context, sends, recvs []Message) error {
	start := time.Now()
	err := e.x.Exchange(ctx, sends, recvs)
	var sent, received int64
	for _, s := range sends {
		sent += nbytes(s.T)
	}
	for _, r := range recvs {
		received += nbytes(r.T)
	}
	e.m.sent.Add(sent)
	e.m.received.Add(received)
	e.m.ops.Add(int64(len(sends) + len(recvs)))
	e.m.nanos.Add(int64(time.Since(start)))
	return err
}

// Mean returns the mean over c's ranks of each rank's v, all-reduced as one
// float32: how strategies average a statistic (a consensus distance) that
// no other collective can carry.
func Mean(ctx context.Context, c Comm, v float64) (float64, error) {
	t := tensor.FromSlice([]float32{float32(v)}, tensor.Shape{1}, tensor.On(DeviceOf(c)))
	defer t.Release()
	if err := c.AllReduce(ctx, t, Avg); err != nil {
		return 0, err
	}
	return t.Item(), nil
}
