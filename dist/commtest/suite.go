package commtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// opTimeout bounds every operation the suite expects to succeed, so that a
// broken backend fails the test instead of hanging it.
const opTimeout = 60 * time.Second

var dtypes = []tensor.DType{tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64}

var reduceOps = []dist.ReduceOp{dist.Sum, dist.Avg, dist.Max, dist.Min}

type suite struct {
	newComms Factory
}

// comms starts a job of n ranks and closes it when t ends.
func (s *suite) comms(t *testing.T, n int) []dist.Comm {
	t.Helper()
	cs := s.newComms(t, n)
	if len(cs) != n {
		t.Fatalf("factory returned %d comms, want %d", len(cs), n)
	}
	t.Cleanup(func() { closeAll(cs) })
	for r, c := range cs {
		if c.Rank() != r || c.Size() != n {
			t.Fatalf("comm %d: Rank %d Size %d, want %d %d", r, c.Rank(), c.Size(), r, n)
		}
	}
	return cs
}

func worldSizes() []int {
	if testing.Short() {
		return []int{1, 2, 3, 5, 8}
	}
	return []int{1, 2, 3, 4, 5, 6, 7, 8}
}

// lengths are element counts: 0, 1, primes, counts around multiples of the
// world size k, and random ones.
func lengths(rng *rand.Rand, k int) []int {
	ls := []int{0, 1, 2, 3, 7, 13, k - 1, k + 1, 5*k + 3, 97, 1009, 16411}
	if !testing.Short() {
		ls = append(ls, 100003)
	}
	ls = append(ls, 1+rng.IntN(5000), 1+rng.IntN(50000))
	slices.Sort(ls)
	return slices.Compact(slices.DeleteFunc(ls, func(n int) bool { return n < 0 }))
}

// each runs fn for every rank on its own goroutine and returns the errors by
// rank; a panic is reported as a test error.
func each(t *testing.T, comms []dist.Comm, fn func(ctx context.Context, r int, c dist.Comm) error) []error {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
					t.Errorf("rank %d: panic: %v\n%s", r, p, debug.Stack())
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			errs[r] = fn(ctx, r, c)
		})
	}
	wg.Wait()
	return errs
}

// noErrors fails t when any rank returned an error.
func noErrors(t *testing.T, what string, errs []error) bool {
	t.Helper()
	ok := true
	for r, err := range errs {
		if err != nil {
			t.Errorf("%s: rank %d: %v", what, r, err)
			ok = false
		}
	}
	return ok
}

// values returns n values exactly representable in dt: integers in
// [−1000, 1000] for integer dtypes, scaled normal samples otherwise.
func values(rng *rand.Rand, dt tensor.DType, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		switch dt {
		case tensor.Int32, tensor.Int64:
			v[i] = float64(rng.IntN(2001) - 1000)
		case tensor.Float32:
			v[i] = float64(float32(rng.NormFloat64() * 10))
		default:
			v[i] = rng.NormFloat64() * 10
		}
	}
	return v
}

// newTensor holds vals with dtype dt; when offset > 0 it is a contiguous view
// starting offset elements into a larger buffer whose other elements are
// sentinels.
func newTensor(vals []float64, dt tensor.DType, offset int) *tensor.Tensor {
	if offset == 0 {
		return tensor.FromSlice(vals, nil, tensor.Of(dt))
	}
	buf := make([]float64, offset+len(vals)+offset)
	for i := range buf {
		buf[i] = 777
	}
	copy(buf[offset:], vals)
	whole := tensor.FromSlice(buf, nil, tensor.Of(dt))
	defer whole.Release()
	return whole.Slice(0, offset, offset+len(vals))
}

func read(t *tensor.Tensor) []float64 { return tensor.ToSlice[float64](t) }

// eps is the unit roundoff of dt (0 for integers).
func eps(dt tensor.DType) float64 {
	switch dt {
	case tensor.Float32:
		return 0x1p-24
	case tensor.Float64:
		return 0x1p-53
	}
	return 0
}

// reduceRef is the definition of op over the ranks' values at one index.
func reduceRef(op dist.ReduceOp, xs []float64) float64 {
	acc := xs[0]
	for _, x := range xs[1:] {
		switch op {
		case dist.Sum, dist.Avg:
			acc += x
		case dist.Max:
			acc = math.Max(acc, x)
		case dist.Min:
			acc = math.Min(acc, x)
		}
	}
	if op == dist.Avg {
		acc /= float64(len(xs))
	}
	return acc
}

// tolerance bounds the rounding error of reducing xs in any order.
func tolerance(op dist.ReduceOp, dt tensor.DType, xs []float64) float64 {
	if op == dist.Max || op == dist.Min {
		return 0
	}
	var abs float64
	for _, x := range xs {
		abs += math.Abs(x)
	}
	tol := 2 * float64(len(xs)+1) * eps(dt) * abs
	if op == dist.Avg {
		tol /= float64(len(xs))
	}
	return tol
}

func opsFor(dt tensor.DType) []dist.ReduceOp {
	if dt == tensor.Int32 || dt == tensor.Int64 {
		return []dist.ReduceOp{dist.Sum, dist.Max, dist.Min}
	}
	return reduceOps
}

// checkReduced compares got[r][i] with op over in[j][base+i] for every rank r.
func checkReduced(t *testing.T, what string, op dist.ReduceOp, dt tensor.DType, in [][]float64, base int, got []float64) {
	t.Helper()
	xs := make([]float64, len(in))
	bad := 0
	for i, g := range got {
		for j := range in {
			xs[j] = in[j][base+i]
		}
		want := reduceRef(op, xs)
		if math.Abs(g-want) > tolerance(op, dt, xs) || math.IsNaN(g) {
			if bad++; bad <= 3 {
				t.Errorf("%s: element %d = %v, want %v", what, i, g, want)
			}
		}
	}
}

func (s *suite) allReduce(t *testing.T) {
	for _, k := range worldSizes() {
		t.Run(fmt.Sprintf("n=%d", k), func(t *testing.T) {
			cs := s.comms(t, k)
			rng := rand.New(rand.NewPCG(uint64(k), 1))
			for _, dt := range dtypes {
				for _, op := range opsFor(dt) {
					for li, n := range lengths(rng, k) {
						what := fmt.Sprintf("%v %v n=%d", dt, op, n)
						in := make([][]float64, k)
						ts := make([]*tensor.Tensor, k)
						for r := range k {
							in[r] = values(rng, dt, n)
							ts[r] = newTensor(in[r], dt, (li%2)*(r+1))
						}
						errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
							return c.AllReduce(ctx, ts[r], op)
						})
						if noErrors(t, what, errs) {
							got0 := read(ts[0])
							checkReduced(t, what, op, dt, in, 0, got0)
							for r := 1; r < k; r++ {
								if got := read(ts[r]); !bitEqual(got, got0) {
									t.Errorf("%s: rank %d's result differs from rank 0's", what, r)
								}
							}
						}
						for _, x := range ts {
							x.Release()
						}
					}
				}
			}
		})
	}
}

// allReduceNaN checks that a NaN on one rank makes every reduction NaN.
func (s *suite) allReduceNaN(t *testing.T) {
	const k = 3
	cs := s.comms(t, k)
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		for _, op := range reduceOps {
			ts := make([]*tensor.Tensor, k)
			for r := range k {
				v := []float64{float64(r), -float64(r)}
				if r == 1 {
					v[0], v[1] = math.NaN(), math.NaN()
				}
				ts[r] = newTensor(v, dt, 0)
			}
			errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
				return c.AllReduce(ctx, ts[r], op)
			})
			if noErrors(t, fmt.Sprintf("%v %v", dt, op), errs) {
				for r, x := range ts {
					if got := read(x); !math.IsNaN(got[0]) || !math.IsNaN(got[1]) {
						t.Errorf("%v %v: rank %d: got %v, want NaN", dt, op, r, got)
					}
				}
			}
			release(ts)
		}
	}
}

// bitEqual reports whether a and b hold the same bits.
func bitEqual(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

func (s *suite) reduceScatter(t *testing.T) {
	for _, k := range worldSizes() {
		t.Run(fmt.Sprintf("n=%d", k), func(t *testing.T) {
			cs := s.comms(t, k)
			rng := rand.New(rand.NewPCG(uint64(k), 2))
			for _, dt := range dtypes {
				for _, op := range opsFor(dt) {
					for li, n := range []int{0, 1, 2, 3, 7, 97, 4099, 1 + rng.IntN(3000)} {
						what := fmt.Sprintf("%v %v chunk=%d", dt, op, n)
						in := make([][]float64, k)
						src := make([]*tensor.Tensor, k)
						dst := make([]*tensor.Tensor, k)
						for r := range k {
							in[r] = values(rng, dt, k*n)
							src[r] = newTensor(in[r], dt, (li%2)*r)
							dst[r] = newTensor(make([]float64, n), dt, (li%2)*(k-r))
						}
						errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
							return c.ReduceScatter(ctx, dst[r], src[r], op)
						})
						if noErrors(t, what, errs) {
							for r := range k {
								checkReduced(t, fmt.Sprintf("%s rank %d", what, r), op, dt, in, r*n, read(dst[r]))
								if got := read(src[r]); !slices.Equal(got, in[r]) {
									t.Errorf("%s: rank %d's src changed", what, r)
								}
							}
						}
						release(src, dst)
					}
				}
			}
		})
	}
}

func release(tss ...[]*tensor.Tensor) {
	for _, ts := range tss {
		for _, x := range ts {
			x.Release()
		}
	}
}

func (s *suite) allGather(t *testing.T) {
	for _, k := range worldSizes() {
		t.Run(fmt.Sprintf("n=%d", k), func(t *testing.T) {
			cs := s.comms(t, k)
			rng := rand.New(rand.NewPCG(uint64(k), 3))
			for _, dt := range dtypes {
				for li, n := range []int{0, 1, 2, 3, 7, 97, 4099, 1 + rng.IntN(3000)} {
					what := fmt.Sprintf("%v chunk=%d", dt, n)
					var want []float64
					src := make([]*tensor.Tensor, k)
					dst := make([]*tensor.Tensor, k)
					for r := range k {
						v := values(rng, dt, n)
						want = append(want, v...)
						src[r] = newTensor(v, dt, (li%2)*(r+2))
						dst[r] = newTensor(values(rng, dt, k*n), dt, (li%2)*r)
					}
					errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
						return c.AllGather(ctx, dst[r], src[r])
					})
					if noErrors(t, what, errs) {
						for r := range k {
							if got := read(dst[r]); !slices.Equal(got, want) {
								t.Errorf("%s: rank %d: got %v, want %v", what, r, head(got), head(want))
							}
						}
					}
					release(src, dst)
				}
			}
		})
	}
}

func head(v []float64) []float64 {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}

func (s *suite) broadcast(t *testing.T) {
	for _, k := range worldSizes() {
		t.Run(fmt.Sprintf("n=%d", k), func(t *testing.T) {
			cs := s.comms(t, k)
			rng := rand.New(rand.NewPCG(uint64(k), 4))
			for _, dt := range dtypes {
				for root := range k {
					for li, n := range []int{0, 1, 13, 16411, 1 + rng.IntN(100000)} {
						what := fmt.Sprintf("%v root=%d n=%d", dt, root, n)
						in := make([][]float64, k)
						ts := make([]*tensor.Tensor, k)
						for r := range k {
							in[r] = values(rng, dt, n)
							ts[r] = newTensor(in[r], dt, (li%2)*(r+1))
						}
						errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
							return c.Broadcast(ctx, ts[r], root)
						})
						if noErrors(t, what, errs) {
							for r := range k {
								if got := read(ts[r]); !slices.Equal(got, in[root]) {
									t.Errorf("%s: rank %d: got %v, want %v", what, r, head(got), head(in[root]))
								}
							}
						}
						release(ts)
					}
				}
			}
		})
	}
}

func (s *suite) barrier(t *testing.T) {
	for _, k := range worldSizes() {
		t.Run(fmt.Sprintf("n=%d", k), func(t *testing.T) {
			cs := s.comms(t, k)
			const rounds = 20
			var entered [rounds]atomic.Int32
			errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
				for i := range rounds {
					if (i+r)%3 == 0 {
						time.Sleep(time.Millisecond)
					}
					entered[i].Add(1)
					if err := c.Barrier(ctx); err != nil {
						return err
					}
					if e := entered[i].Load(); e != int32(k) {
						return fmt.Errorf("left barrier %d after %d of %d ranks entered", i, e, k)
					}
				}
				return nil
			})
			noErrors(t, "barrier", errs)
		})
	}
}

func (s *suite) sendRecv(t *testing.T) {
	t.Run("TagsAndOrder", func(t *testing.T) {
		cs := s.comms(t, 2)
		const m = 6
		msg := func(tag, i int) []float64 { return []float64{float64(100*tag + i), float64(-i), float64(tag)} }
		errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
			if r == 0 {
				for i := range m {
					for _, tag := range []int{1, 2, -3} {
						x := tensor.FromSlice(msg(tag, i), nil, tensor.Of(tensor.Float32))
						err := c.Send(ctx, x, 1, tag)
						x.Release()
						if err != nil {
							return err
						}
					}
				}
				return nil
			}
			for _, tag := range []int{-3, 2, 1} {
				for i := range m {
					x := tensor.Zeros(tensor.Shape{3})
					err := c.Recv(ctx, x, 0, tag)
					got := read(x)
					x.Release()
					if err != nil {
						return err
					}
					if want := msg(tag, i); !slices.Equal(got, want) {
						return fmt.Errorf("message %d of tag %d: got %v, want %v", i, tag, got, want)
					}
				}
			}
			return nil
		})
		noErrors(t, "send/recv", errs)
	})
	t.Run("Ring", func(t *testing.T) {
		for _, k := range []int{1, 2, 3, 5} {
			cs := s.comms(t, k)
			rng := rand.New(rand.NewPCG(uint64(k), 5))
			for _, dt := range dtypes {
				for li, n := range []int{0, 1, 1000, 16384 / dt.Size()} {
					what := fmt.Sprintf("n=%d %v len=%d", k, dt, n)
					in := make([][]float64, k)
					for r := range k {
						in[r] = values(rng, dt, n)
					}
					errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
						x := newTensor(in[r], dt, li%2)
						y := newTensor(make([]float64, n), dt, (li+1)%2)
						defer x.Release()
						defer y.Release()
						if err := c.Send(ctx, x, (r+1)%k, 9); err != nil {
							return err
						}
						if err := c.Recv(ctx, y, (r+k-1)%k, 9); err != nil {
							return err
						}
						if got, want := read(y), in[(r+k-1)%k]; !slices.Equal(got, want) {
							return fmt.Errorf("got %v, want %v", head(got), head(want))
						}
						return nil
					})
					noErrors(t, what, errs)
				}
			}
		}
	})
}

func (s *suite) newGroup(t *testing.T) {
	const k = 5
	cs := s.comms(t, k)
	vals := func(r int) []float64 { return []float64{float64(r), float64(10 * r), 1} }
	// sum of vals over world ranks.
	sum := func(members ...int) []float64 {
		out := make([]float64, 3)
		for _, m := range members {
			for i, v := range vals(m) {
				out[i] += v
			}
		}
		return out
	}
	groupA, groupB := []int{1, 3, 4}, []int{0, 2}
	errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
		a, err := c.NewGroup(ctx, groupA)
		if err != nil {
			return err
		}
		b, err := c.NewGroup(ctx, groupB)
		if err != nil {
			return err
		}
		for _, g := range []struct {
			ranks []int
			c     dist.Comm
		}{{groupA, a}, {groupB, b}} {
			i := slices.Index(g.ranks, r)
			if (i < 0) != (g.c == nil) {
				return fmt.Errorf("group %v: member %v, got comm %v", g.ranks, i >= 0, g.c != nil)
			}
			if g.c == nil {
				continue
			}
			defer g.c.Close()
			if g.c.Rank() != i || g.c.Size() != len(g.ranks) {
				return fmt.Errorf("group %v: Rank %d Size %d, want %d %d", g.ranks, g.c.Rank(), g.c.Size(), i, len(g.ranks))
			}
			x := tensor.FromSlice(vals(r), nil)
			err := g.c.AllReduce(ctx, x, dist.Sum)
			got := read(x)
			x.Release()
			if err != nil {
				return err
			}
			if want := sum(g.ranks...); !slices.Equal(got, want) {
				return fmt.Errorf("group %v: all-reduce got %v, want %v", g.ranks, got, want)
			}
		}
		if a != nil {
			// Group {0, 2} of A is world ranks {1, 4}.
			sub, err := a.NewGroup(ctx, []int{0, 2})
			if err != nil {
				return err
			}
			if sub != nil {
				defer sub.Close()
				x := tensor.FromSlice(vals(r), nil)
				err := sub.AllReduce(ctx, x, dist.Sum)
				got := read(x)
				x.Release()
				if err != nil {
					return err
				}
				if want := sum(1, 4); !slices.Equal(got, want) {
					return fmt.Errorf("sub-group of %v: got %v, want %v", groupA, got, want)
				}
			} else if r != 3 {
				return fmt.Errorf("world rank %d got no sub-group comm", r)
			}
		}
		x := tensor.FromSlice(vals(r), nil)
		defer x.Release()
		if err := c.AllReduce(ctx, x, dist.Sum); err != nil {
			return err
		}
		if got, want := read(x), sum(0, 1, 2, 3, 4); !slices.Equal(got, want) {
			return fmt.Errorf("world after groups: got %v, want %v", got, want)
		}
		return nil
	})
	noErrors(t, "groups", errs)
}

func (s *suite) queue(t *testing.T) {
	const k = 3
	cs := s.comms(t, k)
	const m = 20
	errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
		q := dist.NewQueue(ctx, c)
		defer q.Close()
		xs := make([]*tensor.Tensor, m)
		works := make([]*dist.Work, 0, 2*m)
		var order []int
		for i := range xs {
			xs[i] = tensor.FromSlice([]float64{float64(r * i), float64(i)}, nil)
			defer xs[i].Release()
			if i%4 == 3 {
				works = append(works, q.Broadcast(xs[i], i%k))
			} else {
				works = append(works, q.AllReduce(xs[i], dist.Sum))
			}
			prev := works[len(works)-1]
			works = append(works, q.Do(func(context.Context) error {
				select {
				case <-prev.Done():
				default:
					return fmt.Errorf("queued function %d ran before the operation issued ahead of it", i)
				}
				order = append(order, i)
				return nil
			}))
		}
		for _, w := range works {
			if err := w.Wait(ctx); err != nil {
				return err
			}
		}
		if !slices.IsSorted(order) || len(order) != m {
			return fmt.Errorf("queue ran its functions in order %v", order)
		}
		for i, x := range xs {
			want := []float64{float64(i * (k * (k - 1) / 2)), float64(k * i)}
			if i%4 == 3 {
				want = []float64{float64(i % k * i), float64(i)}
			}
			if got := read(x); !slices.Equal(got, want) {
				return fmt.Errorf("operation %d: got %v, want %v", i, got, want)
			}
		}
		return nil
	})
	noErrors(t, "queue", errs)
}

// mismatch gives ranks disagreeing tensors; every rank must return an error.
func (s *suite) mismatch(t *testing.T) {
	cases := []struct {
		name string
		op   func(ctx context.Context, r int, c dist.Comm) error
	}{
		{"AllReduceSize", func(ctx context.Context, r int, c dist.Comm) error {
			x := tensor.Ones(tensor.Shape{5 + r})
			defer x.Release()
			return c.AllReduce(ctx, x, dist.Sum)
		}},
		{"AllReduceDType", func(ctx context.Context, r int, c dist.Comm) error {
			x := tensor.Ones(tensor.Shape{5}, tensor.Of(dtypes[r%2]))
			defer x.Release()
			return c.AllReduce(ctx, x, dist.Sum)
		}},
		{"BroadcastSize", func(ctx context.Context, r int, c dist.Comm) error {
			x := tensor.Ones(tensor.Shape{3 * (r + 1)})
			defer x.Release()
			return c.Broadcast(ctx, x, 0)
		}},
		{"AllGatherSize", func(ctx context.Context, r int, c dist.Comm) error {
			src := tensor.Ones(tensor.Shape{4})
			dst := tensor.Ones(tensor.Shape{7})
			defer src.Release()
			defer dst.Release()
			return c.AllGather(ctx, dst, src)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := s.comms(t, 2)
			errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
				ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				return tc.op(ctx, r, c)
			})
			for r, err := range errs {
				if err == nil {
					t.Errorf("rank %d: no error", r)
				}
			}
		})
	}
}

// timeout leaves the last rank out of an all-reduce: the others must fail
// once their context ends.
func (s *suite) timeout(t *testing.T) {
	const k = 3
	cs := s.comms(t, k)
	const d = 300 * time.Millisecond
	errs := each(t, cs[:k-1], func(ctx context.Context, r int, c dist.Comm) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		x := tensor.Ones(tensor.Shape{1000})
		defer x.Release()
		start := time.Now()
		err := c.AllReduce(ctx, x, dist.Sum)
		if el := time.Since(start); el > d+10*time.Second {
			t.Errorf("rank %d: failed after %v with a %v deadline", r, el, d)
		}
		return err
	})
	for r, err := range errs {
		var oe *dist.OpError
		if !errors.As(err, &oe) {
			t.Errorf("rank %d: got %v, want an *OpError", r, err)
		}
	}
}

// close checks that a closed rank makes the others' pending and later
// operations fail with an error naming it.
func (s *suite) close(t *testing.T) {
	const k = 3
	const closer = k - 1
	wantClosed := func(t *testing.T, what string, r int, err error) {
		t.Helper()
		var oe *dist.OpError
		switch {
		case err == nil:
			t.Errorf("%s: rank %d: no error after rank %d closed", what, r, closer)
		case !errors.As(err, &oe):
			t.Errorf("%s: rank %d: got %v, want an *OpError", what, r, err)
		case oe.Rank != closer:
			t.Errorf("%s: rank %d: %v names rank %d, want %d", what, r, err, oe.Rank, closer)
		}
	}
	t.Run("Collective", func(t *testing.T) {
		cs := s.comms(t, k)
		errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
			if r == closer {
				time.Sleep(100 * time.Millisecond)
				return c.Close()
			}
			x := tensor.Ones(tensor.Shape{4096})
			defer x.Release()
			start := time.Now()
			err := c.AllReduce(ctx, x, dist.Sum)
			if el := time.Since(start); el > 10*time.Second {
				t.Errorf("rank %d: pending all-reduce failed only after %v", r, el)
			}
			wantClosed(t, "pending all-reduce", r, err)
			wantClosed(t, "later barrier", r, c.Barrier(ctx))
			wantClosed(t, "later all-reduce", r, c.AllReduce(ctx, x, dist.Sum))
			return nil
		})
		noErrors(t, "close", errs)
		x := tensor.Ones(tensor.Shape{2})
		defer x.Release()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cs[closer].AllReduce(ctx, x, dist.Sum); err == nil {
			t.Errorf("all-reduce on the closed comm: no error")
		}
	})
	t.Run("Recv", func(t *testing.T) {
		cs := s.comms(t, k)
		errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
			if r == closer {
				time.Sleep(100 * time.Millisecond)
				return c.Close()
			}
			x := tensor.Ones(tensor.Shape{16})
			defer x.Release()
			wantClosed(t, "pending recv", r, c.Recv(ctx, x, closer, 0))
			return nil
		})
		noErrors(t, "close", errs)
	})
	// A rank that sends and then closes has said what it sent: the
	// messages are received, in order, and only the Recv after them
	// fails, naming it (a peer that says goodbye and leaves).
	t.Run("SentBeforeClose", func(t *testing.T) {
		cs := s.comms(t, k)
		const m = 3
		sent := make(chan struct{})
		errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
			switch r {
			case closer:
				for i := range m {
					x := tensor.FromSlice([]float64{float64(i), -1, 2}, nil, tensor.Of(tensor.Float32))
					err := c.Send(ctx, x, 0, 5)
					x.Release()
					if err != nil {
						return err
					}
				}
				err := c.Close()
				close(sent)
				return err
			case 0:
				<-sent
				// Give a transport that learns of the close over the
				// network time to learn it.
				time.Sleep(200 * time.Millisecond)
				for i := range m {
					x := tensor.Zeros(tensor.Shape{3})
					err := c.Recv(ctx, x, closer, 5)
					got := read(x)
					x.Release()
					if err != nil {
						return fmt.Errorf("message %d, sent before the close: %w", i, err)
					}
					if want := []float64{float64(i), -1, 2}; !slices.Equal(got, want) {
						return fmt.Errorf("message %d: got %v, want %v", i, got, want)
					}
				}
				x := tensor.Zeros(tensor.Shape{3})
				defer x.Release()
				wantClosed(t, "recv after the messages", r, c.Recv(ctx, x, closer, 5))
			}
			return nil
		})
		noErrors(t, "sent before close", errs)
	})
	// The same when the Recv was posted before the message came, the
	// close right behind it: the message must win over the failure.
	t.Run("PostedBeforeClose", func(t *testing.T) {
		for range 10 {
			cs := s.comms(t, k)
			errs := each(t, cs, func(ctx context.Context, r int, c dist.Comm) error {
				x := tensor.FromSlice([]float64{4, 5}, nil, tensor.Of(tensor.Float32))
				defer x.Release()
				switch r {
				case closer:
					time.Sleep(20 * time.Millisecond)
					if err := c.Send(ctx, x, 0, 6); err != nil {
						return err
					}
					return c.Close()
				case 0:
					x.Fill(0)
					if err := c.Recv(ctx, x, closer, 6); err != nil {
						return fmt.Errorf("message sent before the close: %w", err)
					}
					if got := read(x); !slices.Equal(got, []float64{4, 5}) {
						return fmt.Errorf("got %v, want [4 5]", got)
					}
				}
				return nil
			})
			noErrors(t, "posted before close", errs)
			for _, c := range cs {
				c.Close()
			}
		}
	})
}

// closeAll closes the ranks of a job together, as its processes do: a
// closing rank may wait for its peers to close too.
func closeAll(cs []dist.Comm) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}
