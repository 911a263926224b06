package cpu

import (
	"runtime"
	"sync"
	"time"
)

// MeasurePeak measures the float32 throughput that the active kernel path's
// instructions allow, in GFLOP/s: threads goroutines, each on its own OS
// thread, run independent vector FMAs on registers (no memory traffic) in
// calls of about a millisecond for about d, and the figure adds up each
// thread's fastest call, so that other processes taking turns on the cores
// lower it little. It is the ceiling against which the matrix product's
// GFLOP/s are read. It returns false on the pure-Go path, which has no such
// loop.
func MeasurePeak(threads int, d time.Duration) (gflops float64, ok bool) {
	arch := sgemmActive.Load()
	if arch == nil || threads < 1 {
		return 0, false
	}
	// Calibrate the iterations of one call to about a millisecond.
	n := 1 << 10
	for {
		start := time.Now()
		arch.peak(n)
		if time.Since(start) > time.Millisecond || n >= 1<<30 {
			break
		}
		n *= 2
	}
	calls := max(1, int(d/time.Millisecond))
	best := make([]time.Duration, threads)
	var wg sync.WaitGroup
	for t := range threads {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range calls {
				start := time.Now()
				arch.peak(n)
				if d := time.Since(start); best[t] == 0 || d < best[t] {
					best[t] = d
				}
			}
		})
	}
	wg.Wait()
	flops := float64(n) * float64(arch.peakFlops)
	for _, d := range best {
		gflops += flops / d.Seconds() / 1e9
	}
	return gflops, true
}
