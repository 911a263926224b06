package dist_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
)

// TestTCPCloseAfterBarrier ends jobs as flock train does: every rank
// passes a barrier and closes its communicator soon after. A rank that
// leaves the barrier first must not fail the others, which may still wait
// for messages of the barrier's last rounds or finish their own part
// before they close; nobody logs a failure.
func TestTCPCloseAfterBarrier(t *testing.T) {
	for _, c := range []struct {
		n   int
		shm bool
	}{{2, false}, {3, false}, {4, false}, {5, false}, {2, true}, {3, true}, {4, true}} {
		n, shm := c.n, c.shm
		for range 8 {
			var logs strings.Builder
			var mu sync.Mutex
			log := slog.New(slog.NewTextHandler(&lockedWriter{&logs, &mu}, nil))
			lns, addrs := tcpListeners(t, n)
			comms := make([]dist.Comm, n)
			errs := make([]error, n)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() {
					comms[r], errs[r] = dist.DialTCP(ctx, dist.TCPConfig{Rank: r, Size: n, Addrs: addrs, Listener: lns[r], Token: tcpTestToken,
						Timeout: 5 * time.Second, NoSharedMemory: !shm, Logger: log})
				})
			}
			wg.Wait()
			cancel()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			errs = tcpRun(comms, func(r int, c dist.Comm) error {
				// The ranks arrive at different times, the last ones
				// when the first have long finished their part.
				time.Sleep(time.Duration(r) * time.Millisecond)
				if err := c.Barrier(context.Background()); err != nil {
					return err
				}
				time.Sleep(time.Duration(r) * time.Millisecond)
				return c.Close()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("%d ranks: rank %d: %v", n, r, err)
				}
			}
			mu.Lock()
			if s := logs.String(); strings.Contains(s, "failed") {
				t.Errorf("%d ranks: a clean end logged a failure:\n%s", n, s)
			}
			mu.Unlock()
		}
	}
}
