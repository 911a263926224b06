// Package commtest is the conformance and property suite that every
// dist.Comm backend runs: each collective is checked against its definition
// for random sizes (0, 1, primes, sizes not divisible by the world size),
// the dtypes float32, float64, int32 and int64, world sizes 1–8 and every
// ReduceOp; tagged Send/Recv with ordering; sub-groups; Barrier; Queue
// ordering; and failure handling (a closed or absent rank makes the others
// fail instead of hang).
//
// A backend's test calls
//
//	func TestComm(t *testing.T) {
//		commtest.Run(t, func(t *testing.T, n int) []dist.Comm { ... })
//	}
//
// What the suite requires beyond the dist.Comm contract:
//   - every rank ends a float all-reduce with bit-identical results;
//   - Send does not wait for the matching Recv (messages up to 64 KiB at
//     least), so ranks may all send before they receive;
//   - tensors may be contiguous views at a non-zero offset;
//   - an operation with mismatched sizes or dtypes across ranks returns an
//     error on every rank (possibly only when its context ends) and does
//     not panic;
//   - after a rank's Close, the other ranks' pending and later operations
//     fail with an *OpError whose Rank is the closed rank, except that a
//     Recv still takes the messages that rank sent before it closed.
//
// With -short the suite uses fewer world sizes and lengths.
package commtest

import (
	"testing"

	"github.com/flockml/flock/dist"
)

// Factory returns n connected communicators of a fresh job; element i is
// rank i. The suite closes every Comm it is given (Close may be called more
// than once).
type Factory = func(t *testing.T, n int) []dist.Comm

// Run runs the suite against the backend built by newComms.
func Run(t *testing.T, newComms func(t *testing.T, n int) []dist.Comm) {
	s := &suite{newComms: newComms}
	t.Run("AllReduce", s.allReduce)
	t.Run("AllReduceNaN", s.allReduceNaN)
	t.Run("ReduceScatter", s.reduceScatter)
	t.Run("AllGather", s.allGather)
	t.Run("Broadcast", s.broadcast)
	t.Run("Barrier", s.barrier)
	t.Run("SendRecv", s.sendRecv)
	t.Run("NewGroup", s.newGroup)
	t.Run("Queue", s.queue)
	t.Run("Mismatch", s.mismatch)
	t.Run("Timeout", s.timeout)
	t.Run("Close", s.close)
}
