package tensor

import (
	"sync"
	"sync/atomic"
)

// flopCount holds the state of CountFLOPs: counting is off unless a
// CountFLOPs call is running, so ordinary work pays one atomic load.
var flopCount struct {
	mu sync.Mutex // one CountFLOPs at a time
	on atomic.Bool
	n  atomic.Int64
}

// CountFLOPs runs f and returns the floating-point operations of the matrix
// products and convolutions (forward and both gradients) that ran while it
// did, on any goroutine, counting 2 per multiply-add — the convention of
// published model FLOP counts. Elementwise, reduction and normalisation
// work is not counted. Calls of CountFLOPs run one at a time.
func CountFLOPs(f func()) int64 {
	flopCount.mu.Lock()
	defer flopCount.mu.Unlock()
	flopCount.n.Store(0)
	flopCount.on.Store(true)
	defer flopCount.on.Store(false)
	f()
	return flopCount.n.Load()
}

// addFLOPs records 2·macs operations when CountFLOPs is running.
func addFLOPs(macs int) {
	if flopCount.on.Load() {
		flopCount.n.Add(2 * int64(macs))
	}
}

// convMACs is the number of multiply-adds of a convolution of x [N, C, …]
// with w [O, C/groups, KH, KW] giving y [N, O, OH, OW]; each gradient of
// it costs the same.
func convMACs(y, w Shape) int {
	return y.NumElements() * w[1] * w[2] * w[3]
}
