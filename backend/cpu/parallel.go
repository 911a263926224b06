package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor runs body over [0, n) split into contiguous chunks, using up to
// GOMAXPROCS goroutines. grain is the smallest chunk worth a goroutine (in
// units of the loop index); work below 2·grain runs on the caller.
func parallelFor(n, grain int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	workers := min(runtime.GOMAXPROCS(0), n/grain)
	if workers <= 1 {
		body(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			body(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	body(0, min(chunk, n))
	wg.Wait()
}

// parallelShare runs body over [0, n) like parallelFor, but the goroutines
// take chunks of about n/(4·workers) as they come rather than one fixed
// share each, so that one that starts late or is delayed by the system
// does not hold up the others. body must not depend on which goroutine
// runs a chunk.
func parallelShare(n, grain int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := min(runtime.GOMAXPROCS(0), n/max(1, grain))
	if workers <= 1 {
		body(0, n)
		return
	}
	step := max(1, n/(4*workers))
	var next atomic.Int64
	run := func() {
		for {
			hi := int(next.Add(int64(step)))
			lo := hi - step
			if lo >= n {
				return
			}
			body(lo, min(hi, n))
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	run()
	wg.Wait()
}
