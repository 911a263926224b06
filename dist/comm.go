package dist

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/tensor"
)

// ReduceOp combines the contributions of the ranks elementwise.
type ReduceOp int

// Reductions. Avg is Sum divided by the number of ranks (float dtypes only).
const (
	Sum ReduceOp = iota
	Avg
	Max
	Min
)

func (op ReduceOp) String() string {
	switch op {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("ReduceOp(%d)", int(op))
}

// DefaultTimeout bounds an operation whose context has no deadline.
const DefaultTimeout = 5 * time.Minute

// Comm connects the ranks of a job. Every rank calls the collectives in the
// same order with tensors of the same dtype and shape; they operate in place
// on contiguous host tensors (float32 at least; float64, int32 and int64
// where a backend says so). An operation blocks until this rank's part is
// done, the context ends, or the communicator fails; after a failure (a peer
// died, hung past the timeout, or broke its connection) every pending and
// later operation returns an *OpError naming the peer and the operation.
// A Comm is not safe for concurrent collectives; use a Queue to overlap
// communication with computation.
type Comm interface {
	// Rank is this process's index in [0, Size).
	Rank() int
	// Size is the number of ranks.
	Size() int

	// AllReduce replaces t on every rank by the reduction of all ranks' t.
	AllReduce(ctx context.Context, t *tensor.Tensor, op ReduceOp) error
	// ReduceScatter reduces src (Size·n elements, same on every rank in
	// shape) and leaves chunk r of the result (n elements) in dst on rank r.
	ReduceScatter(ctx context.Context, dst, src *tensor.Tensor, op ReduceOp) error
	// AllGather concatenates every rank's src (n elements) into dst (Size·n
	// elements, rank r's part at offset r·n) on every rank.
	AllGather(ctx context.Context, dst, src *tensor.Tensor) error
	// Broadcast copies root's t into t on every other rank.
	Broadcast(ctx context.Context, t *tensor.Tensor, root int) error
	// Barrier returns once every rank has entered it.
	Barrier(ctx context.Context) error

	// Send delivers t to rank to, matched by a Recv there with the same tag.
	// Messages between two ranks with one tag arrive in order.
	Send(ctx context.Context, t *tensor.Tensor, to, tag int) error
	// Recv fills t with the message from rank from carrying tag. A
	// message sent before its sender closed its Comm is still received.
	Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error

	// NewGroup is called by every rank with the same sorted ranks; members
	// get a Comm over them (ranks renumbered 0..len-1 in that order),
	// others get nil.
	NewGroup(ctx context.Context, ranks []int) (Comm, error)
	// Close releases the connections. Pending operations fail.
	Close() error
}

// Placed is implemented by a Comm whose operations take tensors on a
// device of its own (NCCL's: device pointers on its GPU) instead of host
// tensors. A Comm without it (TCP, shared memory, in-process) takes host
// tensors, whatever device the model lives on: its users stage the
// model's values through host buffers, copying with tensor's cross-device
// copy (CopyFrom) around each operation.
type Placed interface {
	// Device is where the Comm's operands must live; nil means host
	// tensors, as for a Comm that is not Placed (a wrapper such as Meter
	// says so for the Comm it wraps).
	Device() tensor.Device
}

// DeviceOf returns the device on which c's operands live: c's Device when
// c is Placed (and names one), the host's (cpu.Default) otherwise, and for
// a nil c. The buffers a strategy hands to c are allocated there.
func DeviceOf(c Comm) tensor.Device {
	if p, ok := c.(Placed); ok {
		if d := p.Device(); d != nil {
			return d
		}
	}
	return cpu.Default()
}

// Holds reports whether c can take t as an operand where it lies, without
// a staging copy: t is on c's device, or c takes host tensors and t is in
// host memory (on any host device; for a nil c too). The strategies use it
// to decide whether the parameters can live in their communication
// buffers.
func Holds(c Comm, t *tensor.Tensor) bool {
	dev := DeviceOf(c)
	if t.Device() == dev {
		return true
	}
	if p, ok := c.(Placed); ok && p.Device() != nil {
		return false
	}
	_, host := t.Raw().Buf.(backend.HostBuffer)
	return host
}

// OpError reports a failed operation and the peer rank it failed on (−1
// when no single peer is to blame).
type OpError struct {
	Op   string
	Rank int
	Err  error
}

func (e *OpError) Error() string {
	if e.Rank < 0 {
		return fmt.Sprintf("dist: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("dist: %s: rank %d: %v", e.Op, e.Rank, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// ErrClosed is returned by operations on a closed Comm.
var ErrClosed = errors.New("communicator closed")

// WithDefaultTimeout returns ctx bounded by d when it has no deadline.
func WithDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
