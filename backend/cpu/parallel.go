package cpu

import (
	"runtime"
	"sync"
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
