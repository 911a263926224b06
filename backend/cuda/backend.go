package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/flockml/flock/backend"
)

// Name is the registry name of the first GPU; "cuda:<i>" names GPU i.
const Name = "cuda"

// Options tune a Backend.
type Options struct {
	// TF32 lets float32 matrix products and convolutions run on TF32
	// tensor cores (inputs rounded to 10 mantissa bits, float32
	// accumulation): several times faster on Ampere and later, at about
	// 1e-3 relative error. Off by default, so results match the CPU.
	TF32 bool
	// Autocast, when BFloat16 or Float16, makes MatMul and Conv2d (and its
	// backward kernels) of float32 operands round their inputs to that
	// type and compute with float32 accumulation, writing float32 results:
	// the mixed precision of torch.autocast, with float32 master weights
	// and optimizer state left to the caller. Invalid (the zero value)
	// turns it off.
	Autocast backend.DType
	// NoCUBLAS and NoCUDNN make the backend use its own kernels for matrix
	// products and convolutions even when the libraries are installed.
	NoCUBLAS, NoCUDNN bool
}

// Backend runs flock's kernels on one NVIDIA GPU. All its kernels are queued
// on one compute stream, in the order they are called; Read and Synchronize
// wait for them. Memory comes from a caching allocator: Free returns a
// buffer to it at once (tensors free their storage when its reference count
// drops to zero), and TrimCache gives idle memory back to the driver.
type Backend struct {
	ordinal int
	name    string
	eng     engine
	mem     *allocator

	optMu sync.Mutex
	opts  Options

	blas    *cublas
	blasErr error
	dnn     *cudnn
	dnnErr  error

	errMu   sync.Mutex
	errBuf  *Buffer
	sinkBuf *Buffer

	maxGrid int
}

var _ backend.Backend = (*Backend)(nil)

// Buffer is device memory owned by a Backend.
type Buffer struct {
	owner *Backend
	blk   *block
	size  int
}

var _ backend.Buffer = (*Buffer)(nil)

// Backend implements backend.Buffer.
func (b *Buffer) Backend() backend.Backend { return b.owner }

// Size implements backend.Buffer.
func (b *Buffer) Size() int { return b.size }

// Ptr is the buffer's device address (a CUdeviceptr).
func (b *Buffer) Ptr() uintptr { return b.blk.ptr }

// newBackend wraps an engine.
func newBackend(ordinal int, eng engine, opts Options) *Backend {
	b := &Backend{
		ordinal: ordinal,
		name:    Name + ":" + strconv.Itoa(ordinal),
		eng:     eng,
		mem:     newAllocator(eng),
		opts:    opts,
		maxGrid: max(eng.info().Multiprocessors, 1) * 32,
	}
	b.blasErr = fmt.Errorf("cuda: cuBLAS not in use")
	b.dnnErr = fmt.Errorf("cuda: cuDNN not in use")
	return b
}

// Name implements backend.Backend: "cuda:<ordinal>".
func (b *Backend) Name() string { return b.name }

// Ordinal is the device's index among the GPUs the driver sees.
func (b *Backend) Ordinal() int { return b.ordinal }

// Info describes the device.
func (b *Backend) Info() DeviceInfo { return b.eng.info() }

// Options returns the backend's current options.
func (b *Backend) Options() Options {
	b.optMu.Lock()
	defer b.optMu.Unlock()
	return b.opts
}

// SetOptions changes the options; kernels queued later use them.
func (b *Backend) SetOptions(o Options) error {
	if o.Autocast != backend.Invalid && o.Autocast != backend.BFloat16 && o.Autocast != backend.Float16 {
		return fmt.Errorf("cuda: autocast to %v, want bfloat16 or float16", o.Autocast)
	}
	b.optMu.Lock()
	defer b.optMu.Unlock()
	if b.blas != nil && o.TF32 != b.opts.TF32 {
		leave, err := b.eng.enter()
		if err != nil {
			return err
		}
		err = b.blas.setTF32(o.TF32)
		leave()
		if err != nil {
			return err
		}
	}
	b.opts = o
	return nil
}

// Alloc implements backend.Backend.
func (b *Backend) Alloc(nbytes int) (backend.Buffer, error) {
	blk, err := b.mem.alloc(nbytes, b.eng.computeStream())
	if err != nil {
		return nil, fmt.Errorf("cuda: alloc %d bytes on %s: %w", nbytes, b.name, err)
	}
	return &Buffer{owner: b, blk: blk, size: nbytes}, nil
}

// Free implements backend.Backend. The memory goes back to the cache at
// once; work already queued on the compute stream still sees it, as later
// users of the same memory are queued behind that work.
func (b *Backend) Free(buf backend.Buffer) {
	d, ok := buf.(*Buffer)
	if !ok || d.owner != b {
		panic("cuda: Free of a buffer this backend does not own")
	}
	if err := b.mem.release(d.blk); err != nil {
		panic(fmt.Sprintf("cuda: free: %v", err))
	}
}

// RecordStream notes that buf is used by work on stream besides the compute
// stream (a communication stream), so that when it is freed its memory is
// not reused before that work is done.
func (b *Backend) RecordStream(buf backend.Buffer, stream uintptr) {
	d, ok := buf.(*Buffer)
	if !ok || d.owner != b {
		panic("cuda: RecordStream of a buffer this backend does not own")
	}
	b.mem.recordStream(d.blk, stream)
}

// CacheStats returns the counters of the caching allocator.
func (b *Backend) CacheStats() AllocStats { return b.mem.stats() }

// TrimCache waits for the device and returns every cached block to the
// driver.
func (b *Backend) TrimCache() error { return b.mem.trim() }

func (b *Backend) own(buf backend.Buffer) (*Buffer, error) {
	d, ok := buf.(*Buffer)
	if !ok {
		if buf == nil {
			return nil, fmt.Errorf("cuda: nil buffer")
		}
		return nil, fmt.Errorf("cuda: buffer of backend %s, not %s", buf.Backend().Name(), b.name)
	}
	if d.owner != b {
		return nil, fmt.Errorf("cuda: buffer of %s used on %s", d.owner.name, b.name)
	}
	return d, nil
}

// Write implements backend.Backend. The copy is queued on the compute
// stream; src may be reused as soon as Write returns.
func (b *Backend) Write(buf backend.Buffer, off int, src []byte) error {
	d, err := b.own(buf)
	if err != nil {
		return err
	}
	if off < 0 || off+len(src) > d.size {
		return fmt.Errorf("cuda: write of %d bytes at %d overruns a %d-byte buffer", len(src), off, d.size)
	}
	if len(src) == 0 {
		return nil
	}
	return b.eng.upload(d.blk.ptr+uintptr(off), src)
}

// Read implements backend.Backend. It waits for the kernels queued before
// it.
func (b *Backend) Read(dst []byte, buf backend.Buffer, off int) error {
	d, err := b.own(buf)
	if err != nil {
		return err
	}
	if off < 0 || off+len(dst) > d.size {
		return fmt.Errorf("cuda: read of %d bytes at %d overruns a %d-byte buffer", len(dst), off, d.size)
	}
	if len(dst) == 0 {
		return nil
	}
	return b.eng.download(dst, d.blk.ptr+uintptr(off))
}

// Synchronize implements backend.Backend.
func (b *Backend) Synchronize() error { return b.eng.sync() }

// Stream is the compute stream (a CUstream) on which every kernel of the
// backend runs, for code that queues work of its own (NCCL) in order with
// it.
func (b *Backend) Stream() uintptr { return b.eng.computeStream() }

// Do runs fn with the device's context current on the calling thread and
// the goroutine locked to that thread, for code that calls the driver or a
// CUDA library directly.
func (b *Backend) Do(fn func() error) error {
	leave, err := b.eng.enter()
	if err != nil {
		return err
	}
	defer leave()
	return fn()
}

// Pointer returns the device address of v's first element.
func (b *Backend) Pointer(v backend.View) (uintptr, error) {
	if err := b.checkView("pointer", "view", v); err != nil {
		return 0, err
	}
	return b.ptr(v), nil
}

// ptr is the address of v's first element; v has been checked.
func (b *Backend) ptr(v backend.View) uintptr {
	return v.Buf.(*Buffer).blk.ptr + uintptr(v.Offset*v.DType.Size())
}

// checkView validates a view that a kernel addresses: its buffer is this
// backend's, its dtype known, strides non-negative and every element inside
// the buffer (a kernel reading past the end would fault the device).
func (b *Backend) checkView(kernel, name string, v backend.View) error {
	if v.Buf == nil {
		return fmt.Errorf("cuda: %s: %s has no buffer", kernel, name)
	}
	d, err := b.own(v.Buf)
	if err != nil {
		return fmt.Errorf("cuda: %s: %s: %w", kernel, name, err)
	}
	if v.DType.Size() == 0 {
		return fmt.Errorf("cuda: %s: %s has dtype %v", kernel, name, v.DType)
	}
	if len(v.Strides) != len(v.Shape) {
		return fmt.Errorf("cuda: %s: %s has shape %v and %d strides", kernel, name, v.Shape, len(v.Strides))
	}
	if v.Offset < 0 {
		return fmt.Errorf("cuda: %s: %s has offset %d", kernel, name, v.Offset)
	}
	last := v.Offset
	for i, n := range v.Shape {
		if n < 0 || v.Strides[i] < 0 {
			return fmt.Errorf("cuda: %s: %s has shape %v, strides %v", kernel, name, v.Shape, v.Strides)
		}
		if n == 0 {
			return nil
		}
		last += (n - 1) * v.Strides[i]
	}
	if (last+1)*v.DType.Size() > d.size {
		return fmt.Errorf("cuda: %s: %s (shape %v, strides %v, offset %d) overruns its %d-byte buffer", kernel, name, v.Shape, v.Strides, v.Offset, d.size)
	}
	return nil
}

// checkSame validates dst and the inputs of an elementwise kernel, which
// must all have dst's shape.
func (b *Backend) checkSame(kernel string, dst backend.View, names []string, ins ...backend.View) error {
	if err := b.checkView(kernel, "dst", dst); err != nil {
		return err
	}
	for i, v := range ins {
		if err := b.checkView(kernel, names[i], v); err != nil {
			return err
		}
		if !v.Shape.Equal(dst.Shape) {
			return fmt.Errorf("cuda: %s: %s shape %v, dst shape %v", kernel, names[i], v.Shape, dst.Shape)
		}
	}
	return nil
}

// checkDense validates an operand of the heavier kernels: dtype dt, shape
// (when not nil) and row-major contiguous.
func (b *Backend) checkDense(kernel, name string, v backend.View, dt backend.DType, shape backend.Shape) error {
	return backend.CheckDense("cuda: "+kernel, b.operandCheck(kernel), name, v, dt, shape)
}

// checkOptional validates an optional per-channel operand: absent (the zero
// View), or a contiguous view of dtype dt holding n elements.
func (b *Backend) checkOptional(kernel, name string, v backend.View, dt backend.DType, n int) error {
	return backend.CheckVector("cuda: "+kernel, b.operandCheck(kernel), name, v, dt, n)
}

// operandCheck is checkView for the backend's shared operand checks.
func (b *Backend) operandCheck(kernel string) backend.OperandCheck {
	return func(name string, v backend.View) error { return b.checkView(kernel, name, v) }
}

// optPtr is the address of an optional operand, 0 when absent.
func (b *Backend) optPtr(v backend.View) uintptr {
	if v.IsZero() {
		return 0
	}
	return b.ptr(v)
}

func floatType(kernel string, dt backend.DType) error {
	return backend.CheckFloat("cuda: "+kernel, dt)
}

// typeTag is the suffix of a kernel's name for dtype dt.
func typeTag(dt backend.DType) string {
	switch dt {
	case backend.Float32:
		return "f32"
	case backend.Float64:
		return "f64"
	case backend.Float16:
		return "f16"
	case backend.BFloat16:
		return "bf16"
	case backend.Int32:
		return "i32"
	case backend.Int64:
		return "i64"
	case backend.Uint8:
		return "u8"
	case backend.Bool:
		return "b8"
	}
	panic(fmt.Sprintf("cuda: no kernels for dtype %v", dt))
}

// Threads per block of the elementwise kernels.
const blockThreads = 256

// launchN runs a grid-stride kernel over n items.
func (b *Backend) launchN(module, name string, n int, a *Args) error {
	if n <= 0 {
		return nil
	}
	grid := min((n+blockThreads-1)/blockThreads, b.maxGrid)
	return b.eng.launch(module, name, grid, blockThreads, 0, a)
}

// rowThreads is the block size of kernels that give each block one row of
// length n: a multiple of 32 up to 1024, no larger than the row needs.
func rowThreads(n int) int {
	t := 32
	for t < n && t < 1024 {
		t *= 2
	}
	return t
}

// noError is the initial value of the error word: no position failed.
const noError = math.MaxInt64

// withErrorWord runs fn with the address of a device word that kernels
// lower to the first position at which they found bad input, and returns
// that position (noError when none). It waits for the device.
func (b *Backend) withErrorWord(fn func(word uintptr) error) (int64, error) {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	if b.errBuf == nil {
		buf, err := b.Alloc(8)
		if err != nil {
			return 0, err
		}
		b.errBuf = buf.(*Buffer)
	}
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], noError)
	if err := b.eng.upload(b.errBuf.blk.ptr, w[:]); err != nil {
		return 0, err
	}
	if err := fn(b.errBuf.blk.ptr); err != nil {
		return 0, err
	}
	if err := b.eng.download(w[:], b.errBuf.blk.ptr); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(w[:])), nil
}

// sinkWord is an error word that is never read, for kernels whose input
// was validated before they run.
func (b *Backend) sinkWord() (uintptr, error) {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	if b.sinkBuf == nil {
		buf, err := b.Alloc(8)
		if err != nil {
			return 0, err
		}
		b.sinkBuf = buf.(*Buffer)
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], noError)
		if err := b.eng.upload(b.sinkBuf.blk.ptr, w[:]); err != nil {
			return 0, err
		}
	}
	return b.sinkBuf.blk.ptr, nil
}

// scratch allocates a temporary device buffer that release returns.
func (b *Backend) scratch(nbytes int) (*Buffer, func(), error) {
	buf, err := b.Alloc(nbytes)
	if err != nil {
		return nil, nil, err
	}
	d := buf.(*Buffer)
	return d, func() { b.Free(d) }, nil
}

// scratchView allocates a contiguous temporary view.
func (b *Backend) scratchView(dt backend.DType, shape backend.Shape) (backend.View, func(), error) {
	buf, release, err := b.scratch(max(shape.NumElements(), 1) * dt.Size())
	if err != nil {
		return backend.View{}, nil, err
	}
	return backend.Contiguous(buf, dt, shape.Clone()), release, nil
}
