package dist

import (
	"context"
	"sync"

	"github.com/flockml/flock/tensor"
)

// Work is the handle of an operation issued through a Queue.
type Work struct {
	done chan struct{}
	err  error
}

// Wait blocks until the operation is done or ctx ends, and returns the
// operation's error (or the context's).
func (w *Work) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the operation has finished.
func (w *Work) Done() <-chan struct{} { return w.done }

// Queue runs the operations of one Comm on a background goroutine, in the
// order they were issued — the order every rank must agree on — so that the
// caller can keep computing (data parallelism starts all-reduces of gradient
// buckets while backward still runs).
type Queue struct {
	c    Comm
	ctx  context.Context
	jobs chan job
	once sync.Once
	wg   sync.WaitGroup
}

type job struct {
	run func(ctx context.Context) error
	w   *Work
}

// NewQueue starts a queue over c. Operations run under ctx; Close stops the
// queue after the issued operations have run.
func NewQueue(ctx context.Context, c Comm) *Queue {
	q := &Queue{c: c, ctx: ctx, jobs: make(chan job, 64)}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		for j := range q.jobs {
			j.w.err = j.run(q.ctx)
			close(j.w.done)
		}
	}()
	return q
}

// Do issues fn, which runs after every operation issued before it.
func (q *Queue) Do(fn func(ctx context.Context) error) *Work {
	w := &Work{done: make(chan struct{})}
	q.jobs <- job{run: fn, w: w}
	return w
}

// AllReduce issues c.AllReduce(t, op); t must stay alive until Wait.
func (q *Queue) AllReduce(t *tensor.Tensor, op ReduceOp) *Work {
	return q.Do(func(ctx context.Context) error { return q.c.AllReduce(ctx, t, op) })
}

// Broadcast issues c.Broadcast(t, root).
func (q *Queue) Broadcast(t *tensor.Tensor, root int) *Work {
	return q.Do(func(ctx context.Context) error { return q.c.Broadcast(ctx, t, root) })
}

// Close waits for the issued operations and stops the queue.
func (q *Queue) Close() {
	q.once.Do(func() { close(q.jobs) })
	q.wg.Wait()
}
