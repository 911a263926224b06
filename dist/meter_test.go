package dist_test

import (
	"context"
	"sync"
	"testing"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// TestMeter checks the bytes a Meter counts for each operation against the
// ring algorithms' costs, and that the operations still do their work.
func TestMeter(t *testing.T) {
	const n, elems = 3, 30
	comms := dist.NewLocal(n)
	meters := make([]*dist.Meter, n)
	for r := range n {
		meters[r] = dist.NewMeter(comms[r])
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	sums := make([]float64, n)
	for r := range n {
		wg.Go(func() {
			m := meters[r]
			x := tensor.Full(tensor.Shape{elems}, float64(r+1))
			defer x.Release()
			if err := m.AllReduce(ctx, x, dist.Sum); err != nil {
				t.Error(err)
			}
			sums[r] = x.At(0)
			if err := m.Broadcast(ctx, x, 1); err != nil {
				t.Error(err)
			}
			src := tensor.Zeros(tensor.Shape{elems})
			dst := tensor.Zeros(tensor.Shape{elems * n})
			defer src.Release()
			defer dst.Release()
			if err := m.AllGather(ctx, dst, src); err != nil {
				t.Error(err)
			}
			if err := m.ReduceScatter(ctx, src, dst, dist.Sum); err != nil {
				t.Error(err)
			}
			if err := m.Barrier(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	const s = 4 * elems // bytes of x
	for r, m := range meters {
		if sums[r] != 6 {
			t.Errorf("rank %d: all-reduce gave %v, want 6", r, sums[r])
		}
		ring := int64(2 * (n - 1) * s / n)
		gather := int64((n - 1) * s) // (n−1)/n of the n·s-byte result
		var sent, recv int64 = ring + 2*gather, ring + 2*gather
		if r == 1 {
			sent += s
		} else {
			recv += s
		}
		tr := m.Traffic()
		if tr.Sent != sent || tr.Received != recv || tr.Ops != 5 {
			t.Errorf("rank %d: traffic %+v, want %d sent, %d received in 5 operations", r, tr, sent, recv)
		}
	}
	if got := dist.AllReduceBytes(1000, 4); got != 1500 {
		t.Errorf("AllReduceBytes(1000, 4) = %d, want 1500", got)
	}
	if got := dist.AllReduceBytes(1000, 1); got != 0 {
		t.Errorf("AllReduceBytes(1000, 1) = %d, want 0", got)
	}
}

// TestMean checks that Mean averages one value per rank.
func TestMean(t *testing.T) {
	comms := dist.NewLocal(4)
	got := make([]float64, 4)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			m, err := dist.Mean(context.Background(), comms[r], float64(r*r))
			if err != nil {
				t.Error(err)
			}
			got[r] = m
		})
	}
	wg.Wait()
	for r, m := range got {
		if m != 3.5 {
			t.Errorf("rank %d: mean %v, want 3.5", r, m)
		}
	}
}
