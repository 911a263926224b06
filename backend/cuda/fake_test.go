package cuda

import (
	"fmt"
	"sort"
	"sync"
)

// fakeEngine stands in for a GPU in the tests that run without one: its
// memory is host memory at made-up device addresses, copies copy, and
// launches are recorded (not run), so that the host side of every kernel —
// validation, layouts, argument packing, choice of kernel — runs
// everywhere.
type fakeEngine struct {
	mu       sync.Mutex
	next     uintptr
	blocks   map[uintptr][]byte
	launches []launchRecord
	events   map[uintptr]bool // event → passed
	gone     map[uintptr]bool // destroyed streams
	nextEv   uintptr
	failNext error // returned by the next malloc
	limit    int   // bytes the fake device holds (0 = unlimited)
	used     int
	frees    int
	syncs    int
}

type launchRecord struct {
	module, name string
	grid, block  int
	params       []Param
	args         []byte
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{next: 0x1000_0000, blocks: map[uintptr][]byte{}, events: map[uintptr]bool{}}
}

func newFakeBackend() (*Backend, *fakeEngine) {
	f := newFakeEngine()
	return newBackend(0, f, Options{}), f
}

func (f *fakeEngine) malloc(n int) (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failNext; err != nil {
		f.failNext = nil
		return 0, err
	}
	if f.limit > 0 && f.used+n > f.limit {
		return 0, &Error{Call: "cuMemAlloc", Code: cuErrOutOfMem, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	}
	p := f.next
	f.blocks[p] = make([]byte, n)
	f.used += n
	f.next += uintptr((n + 511) &^ 255) // gaps between blocks catch overruns
	return p, nil
}

func (f *fakeEngine) memInfo() (free, total int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(f.limit - f.used), int64(f.limit), nil
}

func (f *fakeEngine) free(p uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.blocks[p]
	if !ok {
		return fmt.Errorf("fake: free of %#x, not allocated", p)
	}
	f.used -= len(b)
	f.frees++
	delete(f.blocks, p)
	return nil
}

func (f *fakeEngine) record(stream uintptr) (uintptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[stream] {
		// The driver reads the freed CUstream and crashes.
		return 0, fmt.Errorf("fake: event recorded on destroyed stream %#x", stream)
	}
	f.nextEv++
	f.events[f.nextEv] = false
	return f.nextEv, nil
}

func (f *fakeEngine) done(e uintptr) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events[e], nil
}

func (f *fakeEngine) destroy(e uintptr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.events, e)
}

// destroyStream marks stream as destroyed: recording on it fails.
func (f *fakeEngine) destroyStream(stream uintptr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone == nil {
		f.gone = map[uintptr]bool{}
	}
	f.gone[stream] = true
}

// pass marks every recorded event as passed.
func (f *fakeEngine) pass() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for e := range f.events {
		f.events[e] = true
	}
}

func (f *fakeEngine) sync() error {
	f.mu.Lock()
	f.syncs++
	f.mu.Unlock()
	f.pass()
	return nil
}

func (f *fakeEngine) enter() (func(), error) { return func() {}, nil }
func (f *fakeEngine) computeStream() uintptr { return 0x5 }

// mem returns the bytes at device address p, n long.
func (f *fakeEngine) mem(p uintptr, n int) ([]byte, error) {
	bases := make([]uintptr, 0, len(f.blocks))
	for b := range f.blocks {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	i := sort.Search(len(bases), func(i int) bool { return bases[i] > p }) - 1
	if i < 0 {
		return nil, fmt.Errorf("fake: address %#x outside every allocation", p)
	}
	blk := f.blocks[bases[i]]
	off := int(p - bases[i])
	if off+n > len(blk) {
		return nil, fmt.Errorf("fake: %d bytes at %#x overrun a %d-byte allocation", n, p, len(blk))
	}
	return blk[off : off+n], nil
}

func (f *fakeEngine) upload(dst uintptr, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.mem(dst, len(src))
	if err != nil {
		return err
	}
	copy(m, src)
	return nil
}

func (f *fakeEngine) download(dst []byte, src uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.mem(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, m)
	return nil
}

func (f *fakeEngine) copyDevice(dst, src uintptr, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.mem(src, n)
	if err != nil {
		return err
	}
	d, err := f.mem(dst, n)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

func (f *fakeEngine) zero(dst uintptr, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.mem(dst, n)
	if err != nil {
		return err
	}
	clear(d)
	return nil
}

func (f *fakeEngine) launch(module, name string, grid, block, shmem int, a *Args) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if block <= 0 || block > 1024 || block%32 != 0 {
		return fmt.Errorf("fake: launch %s with %d threads per block", name, block)
	}
	f.launches = append(f.launches, launchRecord{
		module: module, name: name, grid: grid, block: block,
		params: append([]Param(nil), a.Params()...), args: append([]byte(nil), a.Bytes()...),
	})
	return nil
}

func (f *fakeEngine) info() DeviceInfo {
	return DeviceInfo{Name: "fake", ComputeMajor: 8, Multiprocessors: 4, MaxThreadsPerBlock: 1024}
}

func (f *fakeEngine) takeLaunches() []launchRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.launches
	f.launches = nil
	return l
}
