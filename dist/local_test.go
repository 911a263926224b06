package dist_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/tensor"
)

func TestLocal(t *testing.T) {
	commtest.Run(t, func(t *testing.T, n int) []dist.Comm { return dist.NewLocal(n) })
}

// ranks runs fn on every comm concurrently and returns the errors by rank.
func ranks(cs []dist.Comm, fn func(r int, c dist.Comm) error) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() { errs[r] = fn(r, c) })
	}
	wg.Wait()
	return errs
}

func closeAll(cs []dist.Comm) {
	for _, c := range cs {
		c.Close()
	}
}

func TestLocalTimeoutNamesMissingRank(t *testing.T) {
	cs := dist.NewLocal(4)
	defer closeAll(cs)
	const missing = 2
	errs := ranks(cs, func(r int, c dist.Comm) error {
		if r == missing {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(50*(r+1))*time.Millisecond)
		defer cancel()
		x := tensor.Ones(tensor.Shape{100})
		defer x.Release()
		return c.AllReduce(ctx, x, dist.Sum)
	})
	for r, err := range errs {
		if r == missing {
			continue
		}
		var oe *dist.OpError
		if !errors.As(err, &oe) || oe.Rank != missing || oe.Op != "all-reduce" || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: got %v, want an allreduce OpError naming rank %d that wraps DeadlineExceeded", r, err, missing)
		}
	}
	x := tensor.Ones(tensor.Shape{100})
	defer x.Release()
	if err := cs[missing].AllReduce(context.Background(), x, dist.Sum); err == nil {
		t.Errorf("late rank joined a broken communicator without error")
	}
}

func TestLocalArgumentErrors(t *testing.T) {
	cases := []struct {
		name string
		op   func(c dist.Comm) error
	}{
		{"AvgOfInt", func(c dist.Comm) error {
			x := tensor.Ones(tensor.Shape{3}, tensor.Of(tensor.Int64))
			defer x.Release()
			return c.AllReduce(context.Background(), x, dist.Avg)
		}},
		{"UnsupportedDType", func(c dist.Comm) error {
			x := tensor.Ones(tensor.Shape{3}, tensor.Of(tensor.Uint8))
			defer x.Release()
			return c.AllReduce(context.Background(), x, dist.Sum)
		}},
		{"UnknownOp", func(c dist.Comm) error {
			x := tensor.Ones(tensor.Shape{3})
			defer x.Release()
			return c.AllReduce(context.Background(), x, dist.ReduceOp(9))
		}},
		{"ReduceScatterSizes", func(c dist.Comm) error {
			dst, src := tensor.Ones(tensor.Shape{3}), tensor.Ones(tensor.Shape{7})
			defer dst.Release()
			defer src.Release()
			return c.ReduceScatter(context.Background(), dst, src, dist.Sum)
		}},
		{"ReduceScatterDTypes", func(c dist.Comm) error {
			dst, src := tensor.Ones(tensor.Shape{3}), tensor.Ones(tensor.Shape{6}, tensor.Of(tensor.Float64))
			defer dst.Release()
			defer src.Release()
			return c.ReduceScatter(context.Background(), dst, src, dist.Sum)
		}},
		{"GroupNotSorted", func(c dist.Comm) error {
			_, err := c.NewGroup(context.Background(), []int{1, 0})
			return err
		}},
		{"GroupsDiffer", func(c dist.Comm) error {
			_, err := c.NewGroup(context.Background(), []int{c.Rank()})
			return err
		}},
		{"BroadcastRootsDiffer", func(c dist.Comm) error {
			x := tensor.Ones(tensor.Shape{3})
			defer x.Release()
			return c.Broadcast(context.Background(), x, c.Rank())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := dist.NewLocal(2)
			defer closeAll(cs)
			for r, err := range ranks(cs, func(_ int, c dist.Comm) error { return tc.op(c) }) {
				var oe *dist.OpError
				if !errors.As(err, &oe) {
					t.Errorf("rank %d: got %v, want an *OpError", r, err)
				}
			}
			errs := ranks(cs, func(_ int, c dist.Comm) error { return c.Barrier(context.Background()) })
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: barrier after an argument error: %v", r, err)
				}
			}
		})
	}
}

func TestLocalPanicsOnProgrammerErrors(t *testing.T) {
	cs := dist.NewLocal(2)
	defer closeAll(cs)
	m := tensor.Ones(tensor.Shape{3, 4})
	defer m.Release()
	tr := m.Transpose(0, 1)
	defer tr.Release()
	cases := []struct {
		name string
		fn   func()
	}{
		{"Nil", func() { cs[0].AllReduce(context.Background(), nil, dist.Sum) }},
		{"NotContiguous", func() { cs[0].AllReduce(context.Background(), tr, dist.Sum) }},
		{"SendRankOutOfRange", func() { cs[0].Send(context.Background(), m, 2, 0) }},
		{"BroadcastRootOutOfRange", func() { cs[0].Broadcast(context.Background(), m, -1) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tc.fn()
		})
	}
}

func TestLocalClosedComm(t *testing.T) {
	cs := dist.NewLocal(2)
	if err := cs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := cs[0].Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	x := tensor.Ones(tensor.Shape{2})
	defer x.Release()
	ctx := context.Background()
	for name, err := range map[string]error{
		"own allreduce":  cs[0].AllReduce(ctx, x, dist.Sum),
		"own send":       cs[0].Send(ctx, x, 1, 0),
		"peer barrier":   cs[1].Barrier(ctx),
		"peer send":      cs[1].Send(ctx, x, 0, 0),
		"peer recv":      cs[1].Recv(ctx, x, 0, 0),
		"peer new group": func() error { _, err := cs[1].NewGroup(ctx, []int{1}); return err }(),
	} {
		if !errors.Is(err, dist.ErrClosed) {
			t.Errorf("%s: got %v, want ErrClosed", name, err)
		}
	}
	cs[1].Close()
}

func TestLocalGroupCloseBreaksOnlyTheGroup(t *testing.T) {
	cs := dist.NewLocal(3)
	defer closeAll(cs)
	ctx := context.Background()
	subs := make([]dist.Comm, 3)
	errs := ranks(cs, func(r int, c dist.Comm) error {
		var err error
		subs[r], err = c.NewGroup(ctx, []int{0, 1})
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	subs[1].Close()
	if err := subs[0].Barrier(ctx); err == nil {
		t.Errorf("barrier in a group with a closed member: no error")
	}
	for r, err := range ranks(cs, func(_ int, c dist.Comm) error { return c.Barrier(ctx) }) {
		if err != nil {
			t.Errorf("world barrier, rank %d: %v", r, err)
		}
	}
	cs[0].Close()
	if err := cs[1].Barrier(ctx); err == nil {
		t.Errorf("world barrier after rank 0 closed: no error")
	}
}

func TestLocalRecv(t *testing.T) {
	cs := dist.NewLocal(2)
	defer closeAll(cs)
	t.Run("TimeoutOnlyFailsItself", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		x := tensor.Zeros(tensor.Shape{2})
		defer x.Release()
		err := cs[1].Recv(ctx, x, 0, 5)
		var oe *dist.OpError
		if !errors.As(err, &oe) || oe.Rank != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, want an OpError naming rank 0 wrapping DeadlineExceeded", err)
		}
		y := tensor.FromSlice([]float32{3, 4}, nil)
		defer y.Release()
		if err := cs[0].Send(context.Background(), y, 1, 5); err != nil {
			t.Fatal(err)
		}
		if err := cs[1].Recv(context.Background(), x, 0, 5); err != nil {
			t.Fatal(err)
		}
		if got := x.Float32s(); got[0] != 3 || got[1] != 4 {
			t.Errorf("got %v after a timed-out Recv, want [3 4]", got)
		}
	})
	t.Run("SizeMismatch", func(t *testing.T) {
		for _, waiting := range []bool{false, true} {
			x := tensor.Ones(tensor.Shape{3})
			y := tensor.Zeros(tensor.Shape{4})
			errs := ranks(cs, func(r int, c dist.Comm) error {
				if r == 0 {
					if waiting {
						time.Sleep(20 * time.Millisecond)
					}
					return c.Send(context.Background(), x, 1, 6)
				}
				return c.Recv(context.Background(), y, 0, 6)
			})
			if errs[0] != nil || errs[1] == nil {
				t.Errorf("receiver waiting %v: send %v, recv %v; want only the recv to fail", waiting, errs[0], errs[1])
			}
			x.Release()
			y.Release()
		}
	})
	t.Run("SendReturnsBeforeRecv", func(t *testing.T) {
		x := tensor.FromSlice([]float64{1, 2, 3}, nil)
		if err := cs[0].Send(context.Background(), x, 0, 1); err != nil {
			t.Fatal(err)
		}
		x.Fill(0)
		if err := cs[0].Recv(context.Background(), x, 0, 1); err != nil {
			t.Fatal(err)
		}
		if got := x.Float64s(); got[0] != 1 || got[2] != 3 {
			t.Errorf("message to self: got %v, want [1 2 3]", got)
		}
		x.Release()
	})
}

// TestLocalAllReduceCopiesNothing checks that the in-process all-reduce moves
// data between the ranks' tensors without staging buffers.
func TestLocalAllReduceCopiesNothing(t *testing.T) {
	const k, n = 4, 1 << 20
	cs := dist.NewLocal(k)
	defer closeAll(cs)
	xs := make([]*tensor.Tensor, k)
	for r := range xs {
		xs[r] = tensor.Full(tensor.Shape{n}, float64(r))
		defer xs[r].Release()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 {
		ranks(cs, func(r int, c dist.Comm) error { return c.AllReduce(context.Background(), xs[r], dist.Avg) })
	}
	runtime.ReadMemStats(&after)
	if b := after.TotalAlloc - before.TotalAlloc; b > n {
		t.Errorf("3 all-reduces of %d float32s allocated %d bytes", n, b)
	}
	for r, x := range xs {
		for _, v := range []float64{x.At(0), x.At(n - 1)} {
			if v != 1.5 {
				t.Fatalf("rank %d: got %v, want 1.5", r, v)
			}
		}
	}
}

func BenchmarkLocalAllReduce(b *testing.B) {
	for _, k := range []int{2, 4, 8} {
		for _, n := range []int{1 << 10, 1 << 22} {
			b.Run(fmt.Sprintf("k=%d/n=%d", k, n), func(b *testing.B) {
				cs := dist.NewLocal(k)
				defer closeAll(cs)
				xs := make([]*tensor.Tensor, k)
				for r := range xs {
					xs[r] = tensor.Ones(tensor.Shape{n})
					defer xs[r].Release()
				}
				b.SetBytes(int64(4 * n))
				b.ResetTimer()
				ranks(cs, func(r int, c dist.Comm) error {
					for i := 0; i < b.N; i++ {
						if err := c.AllReduce(context.Background(), xs[r], dist.Sum); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}

// Four workers average their gradients and take rank 3's parameters.
func ExampleNewLocal() {
	const k = 4
	comms := dist.NewLocal(k)
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	out := make([]string, k)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() {
			ctx := context.Background()
			r := c.Rank()
			grad := tensor.FromSlice([]float32{float32(r), 1}, nil)
			defer grad.Release()
			if err := c.AllReduce(ctx, grad, dist.Avg); err != nil {
				panic(err)
			}
			param := tensor.Full(tensor.Shape{1}, float64(10*r))
			defer param.Release()
			if err := c.Broadcast(ctx, param, 3); err != nil {
				panic(err)
			}
			out[r] = fmt.Sprintf("rank %d: grad %v param %v", r, grad.Float32s(), param.Float32s())
		})
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0: grad [1.5 1] param [30]
	// rank 1: grad [1.5 1] param [30]
	// rank 2: grad [1.5 1] param [30]
	// rank 3: grad [1.5 1] param [30]
}
