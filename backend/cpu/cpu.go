package cpu

import (
	"fmt"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// Name is the registry name of the CPU backend.
const Name = "cpu"

// Backend runs kernels on host memory. The zero value is not usable; use New
// or backend.Get("cpu").
type Backend struct {
	pool bufferPool
}

var _ backend.Backend = (*Backend)(nil)

var defaultBackend = New()

func init() {
	backend.Register(Name, func() (backend.Backend, error) { return defaultBackend, nil })
}

// New returns a CPU backend with its own buffer pool.
func New() *Backend { return &Backend{} }

// Default returns the CPU backend that the registry hands out as "cpu".
func Default() *Backend { return defaultBackend }

// Name implements backend.Backend.
func (c *Backend) Name() string { return Name }

// Buffer is host memory owned by a CPU backend.
type Buffer struct {
	owner *Backend
	data  []byte
	class int // size class in the pool, or -1 when not pooled
}

var _ backend.HostBuffer = (*Buffer)(nil)

// Backend implements backend.Buffer.
func (b *Buffer) Backend() backend.Backend { return b.owner }

// Size implements backend.Buffer.
func (b *Buffer) Size() int { return len(b.data) }

// Bytes implements backend.HostBuffer.
func (b *Buffer) Bytes() []byte { return b.data }

// Alloc implements backend.Backend. Buffers come from a pool of size classes
// so that a training loop at steady state reuses memory instead of asking the
// Go heap for more.
func (c *Backend) Alloc(nbytes int) (backend.Buffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("cpu: alloc of %d bytes", nbytes)
	}
	return c.pool.get(c, nbytes), nil
}

// Free implements backend.Backend.
func (c *Backend) Free(buf backend.Buffer) {
	b, ok := buf.(*Buffer)
	if !ok || b.owner != c {
		panic("cpu: Free of a buffer this backend does not own")
	}
	c.pool.put(b)
}

// Write implements backend.Backend.
func (c *Backend) Write(buf backend.Buffer, off int, src []byte) error {
	b, err := c.host(buf)
	if err != nil {
		return err
	}
	if off < 0 || off+len(src) > len(b.data) {
		return fmt.Errorf("cpu: write of %d bytes at %d overruns a %d-byte buffer", len(src), off, len(b.data))
	}
	copy(b.data[off:], src)
	return nil
}

// Read implements backend.Backend.
func (c *Backend) Read(dst []byte, buf backend.Buffer, off int) error {
	b, err := c.host(buf)
	if err != nil {
		return err
	}
	if off < 0 || off+len(dst) > len(b.data) {
		return fmt.Errorf("cpu: read of %d bytes at %d overruns a %d-byte buffer", len(dst), off, len(b.data))
	}
	copy(dst, b.data[off:])
	return nil
}

// Synchronize implements backend.Backend; CPU kernels finish before they
// return.
func (c *Backend) Synchronize() error { return nil }

// PoolStats reports the pool's counters: allocations served from the pool,
// allocations that went to the Go heap, and bytes currently held idle.
func (c *Backend) PoolStats() (hits, misses int64, idleBytes int64) { return c.pool.stats() }

// TrimPool releases every idle pooled buffer to the Go garbage collector.
func (c *Backend) TrimPool() { c.pool.trim() }

func (c *Backend) host(buf backend.Buffer) (*Buffer, error) {
	b, ok := buf.(*Buffer)
	if !ok {
		if buf == nil {
			return nil, fmt.Errorf("cpu: nil buffer")
		}
		return nil, fmt.Errorf("cpu: buffer of backend %s", buf.Backend().Name())
	}
	return b, nil
}

// bytesOf returns the memory of a view's buffer, which must be host memory.
func bytesOf(v backend.View) []byte {
	hb, ok := v.Buf.(backend.HostBuffer)
	if !ok {
		panic("cpu: view of a non-host buffer")
	}
	return hb.Bytes()
}

// sliceOf returns the whole buffer of v as a []T; index it with v.Offset and
// v.Strides.
func sliceOf[T any](v backend.View) []T {
	b := bytesOf(v)
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// F32 returns the whole buffer of v as float32s (ignoring offset/strides).
func F32(v backend.View) []float32 { return sliceOf[float32](v) }

// F64 returns the whole buffer of v as float64s.
func F64(v backend.View) []float64 { return sliceOf[float64](v) }

// I32 returns the whole buffer of v as int32s.
func I32(v backend.View) []int32 { return sliceOf[int32](v) }

// I64 returns the whole buffer of v as int64s.
func I64(v backend.View) []int64 { return sliceOf[int64](v) }

// U8 returns the whole buffer of v as bytes (Uint8 and Bool storage).
func U8(v backend.View) []uint8 { return bytesOf(v) }
