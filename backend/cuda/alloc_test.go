package cuda

import (
	"errors"
	"sync"
	"testing"

	"github.com/flockml/flock/backend"
)

func TestSizeClass(t *testing.T) {
	t.Parallel()
	cases := []struct{ n, want int }{
		{0, 0}, {1, 512}, {512, 512}, {513, 1024}, {1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1<<17}, {3 << 20, 3 << 20}, {(3 << 20) + 1, 3<<20 + 1<<18}, {1 << 30, 1 << 30},
	}
	for _, c := range cases {
		if got := sizeClass(c.n); got != c.want {
			t.Errorf("sizeClass(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	// Every class covers its request and wastes at most an eighth above 1 MiB.
	for n := 1; n < 1<<26; n = n*3/2 + 7 {
		c := sizeClass(n)
		if c < n || (n > smallLimit && float64(c-n) > float64(n)/8) || (n <= smallLimit && c-n >= smallQuantum) {
			t.Errorf("sizeClass(%d) = %d", n, c)
		}
		if sizeClass(c) != c {
			t.Errorf("class %d of %d is not a fixed point", c, n)
		}
	}
}

func TestAllocatorReuse(t *testing.T) {
	t.Parallel()
	f := newFakeEngine()
	a := newAllocator(f)
	const s1, s2 = 10, 20
	b1, err := a.alloc(1000, s1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.release(b1); err != nil {
		t.Fatal(err)
	}
	// Same class, same stream: the same block, no new driver allocation.
	b2, _ := a.alloc(900, s1)
	if b2 != b1 {
		t.Errorf("same class on the same stream got a new block")
	}
	// Another stream never gets a block freed on s1 without waiting.
	b3, _ := a.alloc(900, s2)
	if b3 == b1 || b3.ptr == b1.ptr {
		t.Errorf("block reused across streams")
	}
	// A different class gets a different block.
	b4, _ := a.alloc(5000, s1)
	if b4.ptr == b1.ptr {
		t.Errorf("block reused across size classes")
	}
	st := a.stats()
	if st.Hits != 1 || st.Misses != 3 {
		t.Errorf("hits %d misses %d, want 1 and 3", st.Hits, st.Misses)
	}
	if st.Allocated != int64(1024+1024+5120) || st.Requested != 900+900+5000 || st.Cached != 0 {
		t.Errorf("stats %+v", st)
	}
	for _, b := range []*block{b2, b3, b4} {
		if err := a.release(b); err != nil {
			t.Fatal(err)
		}
	}
	st = a.stats()
	if st.Allocated != 0 || st.Cached != st.Reserved || st.Reserved != int64(1024+1024+5120) || st.PeakAllocated != int64(1024+1024+5120) {
		t.Errorf("after release: %+v", st)
	}
	// Releasing is deterministic: the memory is in the cache at once, and
	// trim hands all of it back to the driver.
	if err := a.trim(); err != nil {
		t.Fatal(err)
	}
	if st := a.stats(); st.Reserved != 0 || st.Cached != 0 || st.DriverFrees != 3 {
		t.Errorf("after trim: %+v", st)
	}
	if len(f.blocks) != 0 {
		t.Errorf("%d driver blocks left after trim", len(f.blocks))
	}
}

func TestAllocatorRecordStream(t *testing.T) {
	t.Parallel()
	f := newFakeEngine()
	a := newAllocator(f)
	const compute, comm = 1, 2
	b, _ := a.alloc(4096, compute)
	a.recordStream(b, comm)
	a.recordStream(b, comm) // recorded once
	a.recordStream(b, compute)
	if len(b.others) != 1 {
		t.Fatalf("others %v", b.others)
	}
	if err := a.release(b); err != nil {
		t.Fatal(err)
	}
	// The communication stream may still read the block: it must not come
	// back until the event recorded there has passed.
	c, _ := a.alloc(4096, compute)
	if c.ptr == b.ptr {
		t.Fatalf("block reused before the other stream's work passed")
	}
	f.pass()
	a.release(c)
	d, _ := a.alloc(4096, compute)
	e, _ := a.alloc(4096, compute)
	if d.ptr != b.ptr && e.ptr != b.ptr {
		t.Errorf("block not reused after its event passed")
	}
	if len(f.events) != 0 {
		t.Errorf("%d events not destroyed", len(f.events))
	}
}

// TestFreeAfterStreamDestroyed frees buffers that a communication stream
// used after that stream is gone, as a tensor released after its
// communicator's Close does: the release must not record an event there.
func TestFreeAfterStreamDestroyed(t *testing.T) {
	t.Parallel()
	b, f := newFakeBackend()
	const comm, other = 0x77, 0x78
	early, _ := b.Alloc(4096)
	late, _ := b.Alloc(4096)
	both, _ := b.Alloc(100)
	for _, buf := range []backend.Buffer{early, late, both} {
		b.RecordStream(buf, comm)
	}
	b.RecordStream(both, other)
	b.Free(early) // waits for an event recorded while comm lives

	// What Stream.Destroy does once comm's work has finished.
	b.mem.forgetStream(comm)
	f.destroyStream(comm)

	b.Free(late)
	if blk := late.(*Buffer).blk; len(blk.events) != 0 || len(blk.others) != 0 {
		t.Errorf("released block waits for events %v on streams %v", blk.events, blk.others)
	}
	b.Free(both)
	if blk := both.(*Buffer).blk; len(blk.events) != 1 {
		t.Errorf("block used on a live stream waits for %d events, want 1", len(blk.events))
	}
	if n := len(b.mem.shared); n != 0 {
		t.Errorf("%d released blocks still tracked as shared", n)
	}
	f.pass()
	if err := b.TrimCache(); err != nil {
		t.Fatal(err)
	}
	if st := b.CacheStats(); st.Reserved != 0 {
		t.Errorf("reserved %d bytes after trimming", st.Reserved)
	}
}

func TestAllocatorOutOfMemory(t *testing.T) {
	t.Parallel()
	f := newFakeEngine()
	f.limit = 3 << 20
	a := newAllocator(f)
	x, err := a.alloc(2<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	a.release(x)
	// 2 MiB are cached; a 2.5 MiB request only fits once the cache is
	// emptied, which the allocator does by itself.
	y, err := a.alloc(5<<19, 1)
	if err != nil {
		t.Fatalf("alloc after emptying the cache: %v", err)
	}
	st := a.stats()
	if st.OOMRetries != 1 || st.DriverFrees != 1 || st.Reserved != int64(y.size) {
		t.Errorf("stats %+v", st)
	}
	if f.syncs == 0 {
		t.Errorf("cache emptied without waiting for the device")
	}
	// A request larger than the device fails with an error that says so.
	_, err = a.alloc(4<<20, 1)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("error %v, want out of memory", err)
	}
	// It names the allocation and what the device has left.
	if got, want := err.Error(), "allocating 4.0 MiB, 2.5 MiB allocated already, 512.0 KiB free of 3.0 MiB: cuMemAlloc: out of memory (2)"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	// Other driver errors pass through without emptying the cache.
	f.failNext = errors.New("broken")
	if _, err := a.alloc(100, 1); err == nil || err.Error() != "broken" {
		t.Errorf("error %v", err)
	}
}

func TestAllocatorDoubleFree(t *testing.T) {
	t.Parallel()
	a := newAllocator(newFakeEngine())
	b, _ := a.alloc(10, 1)
	a.release(b)
	defer func() {
		if recover() == nil {
			t.Errorf("second release did not panic")
		}
	}()
	a.release(b)
}

func TestAllocatorZeroSize(t *testing.T) {
	t.Parallel()
	f := newFakeEngine()
	a := newAllocator(f)
	b, err := a.alloc(0, 1)
	if err != nil || b.ptr != 0 {
		t.Fatalf("alloc(0) = %+v, %v", b, err)
	}
	if err := a.release(b); err != nil {
		t.Fatal(err)
	}
	if len(f.blocks) != 0 || a.stats().Misses != 0 {
		t.Errorf("zero-size allocation reached the driver")
	}
}

// TestAllocatorConcurrent allocates and frees from many goroutines (as
// tensors are released from the garbage collector's cleanup goroutine);
// run with -race.
func TestAllocatorConcurrent(t *testing.T) {
	t.Parallel()
	a := newAllocator(newFakeEngine())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				b, err := a.alloc(512*(1+(i+g)%7), uintptr(1+g%2))
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					a.recordStream(b, 9)
				}
				if err := a.release(b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := a.stats(); st.Allocated != 0 || st.Requested != 0 {
		t.Errorf("stats after all releases: %+v", st)
	}
}

func TestBackendBuffers(t *testing.T) {
	t.Parallel()
	b, f := newFakeBackend()
	buf, err := b.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if buf.Size() != 100 || buf.Backend() != b {
		t.Errorf("buffer %v of %v", buf.Size(), buf.Backend())
	}
	src := []byte("hello, device")
	if err := b.Write(buf, 10, src); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := b.Read(got, buf, 10); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(src) {
		t.Errorf("read %q", got)
	}
	if err := b.Write(buf, 95, src); err == nil {
		t.Errorf("overrunning write accepted")
	}
	if err := b.Read(got, buf, -1); err == nil {
		t.Errorf("read at -1 accepted")
	}
	b.Free(buf)
	if st := b.CacheStats(); st.Allocated != 0 || st.Cached != 512 {
		t.Errorf("stats %+v", st)
	}
	if err := b.TrimCache(); err != nil || len(f.blocks) != 0 {
		t.Errorf("trim: %v, %d blocks left", err, len(f.blocks))
	}
	other, _ := newFakeBackend()
	ob, _ := other.Alloc(8)
	if err := b.Write(ob, 0, []byte{1}); err == nil {
		t.Errorf("write to another backend's buffer accepted")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Free of a foreign buffer did not panic")
		}
	}()
	b.Free(ob)
}
