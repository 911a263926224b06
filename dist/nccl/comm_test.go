package nccl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/nccl"
	"github.com/flockml/flock/tensor"
)

// setup returns the first GPU, or skips the test with the reason there is
// no GPU or no NCCL.
func setup(t *testing.T) *cuda.Backend {
	t.Helper()
	if ok, err := cuda.Available(); !ok {
		t.Skipf("needs a GPU: %v", err)
	}
	if err := nccl.Available(); err != nil {
		t.Skipf("needs NCCL: %v", err)
	}
	g, err := cuda.New(0, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestWorldOfOne creates a one-rank communicator through a real rendezvous
// store and runs every operation on it: the results are the inputs.
func TestWorldOfOne(t *testing.T) {
	g := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := dist.StoreConfig{Token: []byte("nccl-world-of-one-token")}
	srv, err := dist.ListenStore("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	store, err := dist.DialStore(ctx, srv.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err := nccl.New(ctx, nccl.Config{Rank: 0, Size: 1, Device: g, Store: store, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, err := nccl.Version(); err == nil {
		t.Logf("NCCL %s on %v", v, g.Info())
	}

	vals := []float32{1, -2, 3.5, 4, 0, 7}
	x := tensor.FromSlice(vals, nil, tensor.On(g))
	defer x.Release()
	for _, op := range []dist.ReduceOp{dist.Sum, dist.Avg, dist.Max, dist.Min} {
		if err := c.AllReduce(ctx, x, op); err != nil {
			t.Fatalf("all-reduce %v: %v", op, err)
		}
	}
	if err := c.Broadcast(ctx, x, 0); err != nil {
		t.Fatal(err)
	}
	y := tensor.Zeros(tensor.Shape{6}, tensor.On(g))
	defer y.Release()
	if err := c.AllGather(ctx, y, x); err != nil {
		t.Fatal(err)
	}
	z := tensor.Zeros(tensor.Shape{6}, tensor.On(g))
	defer z.Release()
	if err := c.ReduceScatter(ctx, z, y, dist.Sum); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	for i, v := range z.Float32s() {
		if v != vals[i] {
			t.Errorf("element %d = %v after the collectives, want %v", i, v, vals[i])
		}
	}
	grp, err := c.NewGroup(ctx, []int{0})
	if err != nil {
		var oe *dist.OpError
		if !errors.As(err, &oe) {
			t.Fatal(err)
		}
		t.Logf("groups: %v", err)
	} else {
		if grp.Size() != 1 || grp.Rank() != 0 {
			t.Errorf("group rank %d of %d", grp.Rank(), grp.Size())
		}
		grp.Close()
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(ctx, x, dist.Sum); !errors.Is(err, dist.ErrClosed) {
		t.Errorf("all-reduce after Close: %v", err)
	}
}

// TestMisuse checks that mistakes on their face panic before reaching NCCL.
func TestMisuse(t *testing.T) {
	g := setup(t)
	c, err := nccl.Init(context.Background(), dist.Env{Rank: 0, Size: 1, LocalRank: 0, LocalSize: 1, MasterAddr: "127.0.0.1"}, g, dist.InitOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	host := tensor.Zeros(tensor.Shape{3})
	defer host.Release()
	defer func() {
		if recover() == nil {
			t.Errorf("all-reduce of a host tensor did not panic")
		}
	}()
	c.AllReduce(context.Background(), host, dist.Sum)
}

func TestUnavailableIsReported(t *testing.T) {
	if err := nccl.Available(); err == nil {
		t.Skip("NCCL is installed")
	} else if err.Error() == "" {
		t.Errorf("empty reason")
	}
	if _, err := nccl.New(context.Background(), nccl.Config{}); err == nil {
		t.Errorf("New without a device or store succeeded")
	}
}
