package jpeg

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time of the calling thread, so that
// benchmarks on a shared machine can report throughput per CPU second as
// well as per wall second.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
