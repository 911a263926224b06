package cuda

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/flockml/flock/internal/term"
)

// memDriver is what the caching allocator needs from the device: raw
// allocation, and events to learn when work queued on a stream has passed a
// point. The real one wraps cuMemAlloc, cuMemFree, cuEventRecord and
// cuEventQuery; tests use a fake.
type memDriver interface {
	malloc(n int) (uintptr, error)
	free(p uintptr) error
	// record marks the current end of stream's queue and returns a handle
	// that done reports on.
	record(stream uintptr) (uintptr, error)
	done(event uintptr) (bool, error)
	destroy(event uintptr)
	// sync waits for all queued work, so that memory is idle before it goes
	// back to the driver.
	sync() error
	// memInfo returns the device's free and total memory in bytes.
	memInfo() (free, total int64, err error)
}

// block is one device allocation handed out by the allocator.
type block struct {
	ptr    uintptr
	size   int     // the size class: what the driver allocated
	req    int     // bytes requested
	stream uintptr // the stream the block is reused on
	// others are the streams besides stream that used the block; when it
	// is released, it waits for them (through events) before reuse.
	others []uintptr
	events []uintptr
	inUse  bool
}

// AllocStats are the counters of the caching allocator. Sizes are in bytes.
type AllocStats struct {
	Allocated     int64 // held by live buffers (by size class)
	Requested     int64 // asked for by live buffers
	Reserved      int64 // held from the driver: live plus cached
	Cached        int64 // idle, waiting for reuse
	PeakAllocated int64
	PeakReserved  int64
	Hits          int64 // allocations served from the cache
	Misses        int64 // allocations that went to the driver
	DriverFrees   int64 // blocks returned to the driver
	OOMRetries    int64 // driver allocations retried after emptying the cache
}

// poolKey is a free list: blocks of one size class last used on one stream.
// Reuse on the same stream needs no synchronisation, as the stream runs the
// new user's work after the old one's.
type poolKey struct {
	stream uintptr
	size   int
}

// allocator is a caching allocator over a memDriver. Freed blocks go back to
// a free list of their size class and stream at once (deterministically,
// when a tensor's last reference is dropped), and are handed out again to a
// request of the same class on the same stream. A block used on other
// streams as well waits, after its release, until events recorded on those
// streams have passed. When the driver runs out of memory the cache is
// emptied and the allocation retried.
type allocator struct {
	mu      sync.Mutex
	drv     memDriver
	free    map[poolKey][]*block
	pending []*block // released, waiting for events of other streams
	// shared are the live blocks used on other streams, so that a stream
	// about to be destroyed can be struck from them (forgetStream).
	shared map[*block]struct{}
	st     AllocStats
}

func newAllocator(drv memDriver) *allocator {
	return &allocator{drv: drv, free: map[poolKey][]*block{}, shared: map[*block]struct{}{}}
}

// Size classes: multiples of 512 bytes up to 1 MiB; above, eight classes per
// power of two, so a block wastes at most an eighth of its size.
const (
	smallQuantum = 512
	smallLimit   = 1 << 20
	largeSteps   = 8
)

// sizeClass returns the size allocated for a request of n bytes.
func sizeClass(n int) int {
	if n <= 0 {
		return 0
	}
	if n <= smallLimit {
		return (n + smallQuantum - 1) &^ (smallQuantum - 1)
	}
	e := bits.Len(uint(n-1)) - 1 // 2^e < n ≤ 2^(e+1)
	step := 1 << (e - 3)         // an eighth of 2^e
	return (n + step - 1) &^ (step - 1)
}

// alloc returns a block of at least n bytes for use on stream.
func (a *allocator) alloc(n int, stream uintptr) (*block, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: alloc of %d bytes", n)
	}
	size := sizeClass(n)
	a.mu.Lock()
	defer a.mu.Unlock()
	if size == 0 {
		return &block{stream: stream, inUse: true}, nil
	}
	a.collectLocked()
	key := poolKey{stream, size}
	if l := a.free[key]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		a.free[key] = l[:len(l)-1]
		a.st.Hits++
		a.st.Cached -= int64(size)
		a.useLocked(b, n)
		return b, nil
	}
	p, err := a.drv.malloc(size)
	if errors.Is(err, ErrOutOfMemory) {
		a.st.OOMRetries++
		if ferr := a.emptyLocked(); ferr != nil {
			return nil, ferr
		}
		p, err = a.drv.malloc(size)
		if errors.Is(err, ErrOutOfMemory) {
			// Name the allocation and what the device has left.
			what := fmt.Sprintf("allocating %s, %s allocated already", term.Bytes(int64(size)), term.Bytes(a.st.Allocated))
			if free, total, ierr := a.drv.memInfo(); ierr == nil && total > 0 {
				what += fmt.Sprintf(", %s free of %s", term.Bytes(free), term.Bytes(total))
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	if err != nil {
		return nil, err
	}
	a.st.Misses++
	a.st.Reserved += int64(size)
	a.st.PeakReserved = max(a.st.PeakReserved, a.st.Reserved)
	b := &block{ptr: p, size: size, stream: stream}
	a.useLocked(b, n)
	return b, nil
}

func (a *allocator) useLocked(b *block, n int) {
	b.req = n
	b.inUse = true
	a.st.Allocated += int64(b.size)
	a.st.Requested += int64(n)
	a.st.PeakAllocated = max(a.st.PeakAllocated, a.st.Allocated)
}

// recordStream notes that b is used on stream s besides its own, so that its
// release waits for the work queued there.
func (a *allocator) recordStream(b *block, s uintptr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s == b.stream {
		return
	}
	for _, o := range b.others {
		if o == s {
			return
		}
	}
	b.others = append(b.others, s)
	if b.inUse {
		a.shared[b] = struct{}{}
	}
}

// forgetStream strikes stream s from the live blocks that used it. The
// caller has waited for s's work and is about to destroy it: recording an
// event on a destroyed stream at a block's release reads freed driver
// memory, and nothing is left on s to wait for.
func (a *allocator) forgetStream(s uintptr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for b := range a.shared {
		b.others = slices.DeleteFunc(b.others, func(o uintptr) bool { return o == s })
		if len(b.others) == 0 {
			delete(a.shared, b)
		}
	}
}

// release returns b to the cache. It panics on a block released twice.
func (a *allocator) release(b *block) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !b.inUse {
		panic("cuda: buffer freed twice")
	}
	b.inUse = false
	delete(a.shared, b)
	if b.size == 0 {
		return nil
	}
	a.st.Allocated -= int64(b.size)
	a.st.Requested -= int64(b.req)
	a.st.Cached += int64(b.size)
	if len(b.others) > 0 {
		for _, s := range b.others {
			e, err := a.drv.record(s)
			if err != nil {
				// The block cannot be proven idle: keep it out of the
				// cache rather than risk reuse under a running kernel.
				a.st.Cached -= int64(b.size)
				a.st.Reserved -= int64(b.size)
				return err
			}
			b.events = append(b.events, e)
		}
		b.others = b.others[:0]
		a.pending = append(a.pending, b)
		return nil
	}
	key := poolKey{b.stream, b.size}
	a.free[key] = append(a.free[key], b)
	return nil
}

// collectLocked moves pending blocks whose events have all passed to their
// free lists.
func (a *allocator) collectLocked() {
	kept := a.pending[:0]
	for _, b := range a.pending {
		ready := true
		for len(b.events) > 0 {
			ok, err := a.drv.done(b.events[0])
			if err != nil || !ok {
				ready = false
				break
			}
			a.drv.destroy(b.events[0])
			b.events = b.events[1:]
		}
		if !ready {
			kept = append(kept, b)
			continue
		}
		key := poolKey{b.stream, b.size}
		a.free[key] = append(a.free[key], b)
	}
	clear(a.pending[len(kept):])
	a.pending = kept
}

// emptyLocked returns every cached block to the driver, after waiting for
// queued work (pending blocks included).
func (a *allocator) emptyLocked() error {
	if err := a.drv.sync(); err != nil {
		return err
	}
	a.collectLocked()
	var first error
	for key, l := range a.free {
		for _, b := range l {
			if err := a.drv.free(b.ptr); err != nil && first == nil {
				first = err
			}
			a.st.DriverFrees++
			a.st.Cached -= int64(b.size)
			a.st.Reserved -= int64(b.size)
		}
		delete(a.free, key)
	}
	return first
}

// trim returns all cached memory to the driver.
func (a *allocator) trim() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.emptyLocked()
}

// stats returns a snapshot of the counters.
func (a *allocator) stats() AllocStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}
