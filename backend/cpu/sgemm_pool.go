package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The helpers of parallel products. A goroutine started for each product
// begins late: the Go runtime parks idle threads, and waking one, which on
// the virtual machines flock runs on means waking an idle virtual CPU, takes
// 50–100 µs, the time of a whole 256³ product. So a helper, once started,
// stays: after its part of a product it spins for sgemmSpin, watching for
// the next, and only then parks. Products that follow one another closely
// (the layers of a network, a benchmark) find it awake.
//
// While it spins it holds a processor, so a goroutine that another kernel
// starts meanwhile may wait for it to park; sgemmSpin is kept below the
// wake-up time that such a goroutine would pay for an idle processor.

// sgemmSpin is how long an idle helper stays awake.
const sgemmSpin = 50 * time.Microsecond

const (
	helperSpinning = iota // idle, awake, watching job
	helperClaimed         // a job is on its way or running
	helperParked          // idle, blocked on wake
)

type sgemmHelper struct {
	state atomic.Int32
	job   atomic.Pointer[func()]
	wake  chan struct{}
}

var sgemmHelpers struct {
	mu   sync.Mutex
	list []*sgemmHelper
}

// sgemmGo runs job on a helper: an idle one if there is one, else a new
// one while there are fewer than GOMAXPROCS−1, else a plain goroutine.
func sgemmGo(job func()) {
	sgemmHelpers.mu.Lock()
	list := sgemmHelpers.list
	sgemmHelpers.mu.Unlock()
	for _, h := range list {
		if h.state.CompareAndSwap(helperSpinning, helperClaimed) {
			h.job.Store(&job)
			return
		}
	}
	for _, h := range list {
		if h.state.CompareAndSwap(helperParked, helperClaimed) {
			h.job.Store(&job)
			h.wake <- struct{}{}
			return
		}
	}
	sgemmHelpers.mu.Lock()
	if len(sgemmHelpers.list) < runtime.GOMAXPROCS(0)-1 {
		h := &sgemmHelper{wake: make(chan struct{}, 1)}
		h.state.Store(helperClaimed)
		h.job.Store(&job)
		sgemmHelpers.list = append(sgemmHelpers.list, h)
		sgemmHelpers.mu.Unlock()
		go h.loop()
		return
	}
	sgemmHelpers.mu.Unlock()
	go job()
}

func (h *sgemmHelper) loop() {
	for {
		// Claimed: the job is stored right after the claim.
		j := h.job.Swap(nil)
		for j == nil {
			j = h.job.Swap(nil)
		}
		(*j)()
		h.state.Store(helperSpinning)
		deadline := time.Now().Add(sgemmSpin)
		for i := 0; h.state.Load() == helperSpinning; i++ {
			if i%64 == 63 && time.Now().After(deadline) {
				if h.state.CompareAndSwap(helperSpinning, helperParked) {
					<-h.wake
				}
				break
			}
		}
	}
}

// sgemmWait spins until n is zero, yielding the processor now and then so
// that a goroutine queued behind the caller (a helper just started) runs.
func sgemmWait(n *atomic.Int64) {
	for i := 0; n.Load() > 0; i++ {
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
}
