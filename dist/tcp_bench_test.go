package dist_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// BenchmarkTCPAllReduce measures float32 all-reduce between ranks running
// as goroutines of this process, over loopback TCP and over shared memory.
// busGB/s is the bus bandwidth 2(n−1)/n·S/T (S bytes per rank, T per
// all-reduce), comparable across world sizes and with NCCL's and Gloo's
// figures.
func BenchmarkTCPAllReduce(b *testing.B) {
	for _, tr := range []string{"tcp", "shm"} {
		for _, n := range []int{2, 4} {
			for _, mib := range []int{1, 16, 100} {
				benchAllReduce(b, tr, n, mib)
			}
		}
	}
}

func benchAllReduce(b *testing.B, tr string, n, mib int) {
	b.Run(fmt.Sprintf("%s/n=%d/%dMiB", tr, n, mib), func(b *testing.B) {
		comms, errs := dialWorld(b, n, time.Minute, tr == "shm")
		for r, err := range errs {
			if err != nil {
				b.Fatalf("rank %d: %v", r, err)
			}
		}
		size := mib << 20
		xs := make([]*tensor.Tensor, n)
		for r := range xs {
			xs[r] = tensor.Ones(tensor.Shape{size / 4})
			defer xs[r].Release()
		}
		ctx := context.Background()
		b.SetBytes(int64(size))
		b.ResetTimer()
		var wg sync.WaitGroup
		errs = make([]error, n)
		for r, c := range comms {
			wg.Go(func() {
				for range b.N {
					if err := c.AllReduce(ctx, xs[r], dist.Sum); err != nil {
						errs[r] = err
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		for r, err := range errs {
			if err != nil {
				b.Fatalf("rank %d: %v", r, err)
			}
		}
		t := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(2*float64(n-1)/float64(n)*float64(size)/t/1e9, "busGB/s")
	})
}
