package commtest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
)

// Loopback connects k ranks of this test's process over loopback TCP
// (dist.DialTCP), with their collectives through shared memory when shm is
// set, and closes them when the test ends: the way strategy tests check
// that a transport gives what in-process ranks give.
func Loopback(t testing.TB, k int, shm bool) []dist.Comm {
	t.Helper()
	lns := make([]net.Listener, k)
	addrs := make([]string, k)
	for r := range k {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[r], addrs[r] = ln, ln.Addr().String()
	}
	comms := make([]dist.Comm, k)
	errs := make([]error, k)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range k {
		wg.Go(func() {
			comms[r], errs[r] = dist.DialTCP(ctx, dist.TCPConfig{Rank: r, Size: k, Addrs: addrs, Listener: lns[r],
				Token: []byte("commtest loopback token"), Timeout: 10 * time.Second, NoSharedMemory: !shm})
		})
	}
	wg.Wait()
	t.Cleanup(func() { closeAll(comms) })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms
}
