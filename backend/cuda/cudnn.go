package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// cudnn is the part of cuDNN's legacy convolution API the backend uses.
// Algorithms are chosen by cudnnFind*AlgorithmEx (which times the
// candidates on the actual buffers) once per shape, and cached.
type cudnn struct {
	lib    *Library
	handle uintptr

	mu    sync.Mutex
	algos map[convKey]convAlgo

	cudnnGetVersion                func() uint64
	cudnnGetErrorString            func(status int32) string
	cudnnCreate                    func(h *uintptr) int32
	cudnnDestroy                   func(h uintptr) int32
	cudnnSetStream                 func(h, stream uintptr) int32
	cudnnCreateTensorDescriptor    func(d *uintptr) int32
	cudnnDestroyTensorDescriptor   func(d uintptr) int32
	cudnnSetTensor4dDescriptorEx   func(d uintptr, dtype int32, n, c, h, w, ns, cs, hs, ws int32) int32
	cudnnCreateFilterDescriptor    func(d *uintptr) int32
	cudnnDestroyFilterDescriptor   func(d uintptr) int32
	cudnnSetFilter4dDescriptor     func(d uintptr, dtype, format, k, c, h, w int32) int32
	cudnnCreateConvDescriptor      func(d *uintptr) int32
	cudnnDestroyConvDescriptor     func(d uintptr) int32
	cudnnSetConvolution2dDesc      func(d uintptr, padH, padW, strideH, strideW, dilH, dilW, mode, compute int32) int32
	cudnnSetConvolutionGroupCount  func(d uintptr, groups int32) int32
	cudnnSetConvolutionMathType    func(d uintptr, math int32) int32
	cudnnFindFwdAlgoEx             func(h, xd, x, wd, w, cd, yd, y uintptr, req int32, got *int32, perf unsafe.Pointer, ws uintptr, wsSize uint64) int32
	cudnnFindBwdDataAlgoEx         func(h, wd, w, dyd, dy, cd, dxd, dx uintptr, req int32, got *int32, perf unsafe.Pointer, ws uintptr, wsSize uint64) int32
	cudnnFindBwdFilterAlgoEx       func(h, xd, x, dyd, dy, cd, dwd, dw uintptr, req int32, got *int32, perf unsafe.Pointer, ws uintptr, wsSize uint64) int32
	cudnnConvolutionForward        func(h uintptr, alpha unsafe.Pointer, xd, x, wd, w, cd uintptr, algo int32, ws uintptr, wsSize uint64, beta unsafe.Pointer, yd, y uintptr) int32
	cudnnConvolutionBackwardData   func(h uintptr, alpha unsafe.Pointer, wd, w, dyd, dy, cd uintptr, algo int32, ws uintptr, wsSize uint64, beta unsafe.Pointer, dxd, dx uintptr) int32
	cudnnConvolutionBackwardFilter func(h uintptr, alpha unsafe.Pointer, xd, x, dyd, dy, cd uintptr, algo int32, ws uintptr, wsSize uint64, beta unsafe.Pointer, dwd, dw uintptr) int32
}

// cuDNN enumerations.
const (
	cudnnDataFloat    = 0
	cudnnDataDouble   = 1
	cudnnDataHalf     = 2
	cudnnDataBFloat16 = 9

	cudnnTensorNCHW       = 0
	cudnnCrossCorrelation = 1
	cudnnTensorOpMath     = 1
	cudnnFMAMath          = 3
	cudnnStatusSuccess    = 0

	// cudnnFind*AlgorithmEx is asked for this many candidates, searching
	// with a workspace of at most cudnnWorkspaceLimit bytes.
	cudnnAlgoCandidates = 8
	cudnnWorkspaceLimit = 1 << 30

	// The layout of cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t:
	// algo (int), status (int), time (float), memory (size_t, 8-aligned),
	// determinism, mathType, reserved[3] (ints); 48 bytes in all.
	cudnnPerfSize         = 48
	cudnnPerfAlgoOffset   = 0
	cudnnPerfStatusOffset = 4
	cudnnPerfTimeOffset   = 8
	cudnnPerfMemoryOffset = 16
)

func loadCUDNN() (*cudnn, error) {
	lib, err := Open(CUDNN)
	if err != nil {
		return nil, err
	}
	c := &cudnn{lib: lib, algos: map[convKey]convAlgo{}}
	b := &Binder{Lib: lib}
	b.Bind(&c.cudnnGetVersion, "cudnnGetVersion")
	b.Bind(&c.cudnnGetErrorString, "cudnnGetErrorString")
	b.Bind(&c.cudnnCreate, "cudnnCreate")
	b.Bind(&c.cudnnDestroy, "cudnnDestroy")
	b.Bind(&c.cudnnSetStream, "cudnnSetStream")
	b.Bind(&c.cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor")
	b.Bind(&c.cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor")
	b.Bind(&c.cudnnSetTensor4dDescriptorEx, "cudnnSetTensor4dDescriptorEx")
	b.Bind(&c.cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor")
	b.Bind(&c.cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor")
	b.Bind(&c.cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor")
	b.Bind(&c.cudnnCreateConvDescriptor, "cudnnCreateConvolutionDescriptor")
	b.Bind(&c.cudnnDestroyConvDescriptor, "cudnnDestroyConvolutionDescriptor")
	b.Bind(&c.cudnnSetConvolution2dDesc, "cudnnSetConvolution2dDescriptor")
	b.Bind(&c.cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount")
	b.Bind(&c.cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType")
	b.Bind(&c.cudnnFindFwdAlgoEx, "cudnnFindConvolutionForwardAlgorithmEx")
	b.Bind(&c.cudnnFindBwdDataAlgoEx, "cudnnFindConvolutionBackwardDataAlgorithmEx")
	b.Bind(&c.cudnnFindBwdFilterAlgoEx, "cudnnFindConvolutionBackwardFilterAlgorithmEx")
	b.Bind(&c.cudnnConvolutionForward, "cudnnConvolutionForward")
	b.Bind(&c.cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData")
	b.Bind(&c.cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter")
	if err := b.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cudnn) check(call string, status int32) error {
	if status == cudnnStatusSuccess {
		return nil
	}
	return &Error{Call: call, Code: int(status), Desc: c.cudnnGetErrorString(status)}
}

func (c *cudnn) init(stream uintptr) error {
	if err := c.check("cudnnCreate", c.cudnnCreate(&c.handle)); err != nil {
		return err
	}
	return c.check("cudnnSetStream", c.cudnnSetStream(c.handle, stream))
}

// Version is cuDNN's version as "9.1.0".
func (c *cudnn) Version() string {
	v := c.cudnnGetVersion()
	if v >= 90000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

// convDir is the direction of a convolution call.
type convDir int

const (
	convForward convDir = iota
	convBackwardData
	convBackwardFilter
)

// convKey identifies a convolution for the algorithm cache.
type convKey struct {
	dir           convDir
	dtype         backend.DType
	tensorOps     bool
	n, c, h, w, o int
	kh, kw        int
	p             backend.ConvParams
}

type convAlgo struct {
	algo      int32
	workspace uint64
}

// convDescs are the descriptors of one call.
type convDescs struct {
	x, y, w, conv uintptr
}

func (c *cudnn) dataType(dt backend.DType) (int32, error) {
	switch dt {
	case backend.Float32:
		return cudnnDataFloat, nil
	case backend.Float64:
		return cudnnDataDouble, nil
	case backend.Float16:
		return cudnnDataHalf, nil
	case backend.BFloat16:
		return cudnnDataBFloat16, nil
	}
	return 0, fmt.Errorf("cuda: cudnn: dtype %v", dt)
}

// descriptors builds the descriptors of x [N, C, H, W], w [O, C/g, KH, KW]
// and y [N, O, OH, OW] (contiguous). Half-precision inputs compute in
// float32; float32 computes in float32 with tensor cores (TF32) only when
// tf32 is set.
func (c *cudnn) descriptors(dt backend.DType, x, w, y backend.Shape, p backend.ConvParams, tf32 bool) (*convDescs, error) {
	ddt, err := c.dataType(dt)
	if err != nil {
		return nil, err
	}
	compute := int32(cudnnDataFloat)
	if dt == backend.Float64 {
		compute = cudnnDataDouble
	}
	d := &convDescs{}
	fail := func(call string, s int32) error {
		if err := c.check(call, s); err != nil {
			c.destroy(d)
			return err
		}
		return nil
	}
	tensor := func(dst *uintptr, s backend.Shape) error {
		if err := fail("cudnnCreateTensorDescriptor", c.cudnnCreateTensorDescriptor(dst)); err != nil {
			return err
		}
		st := backend.ContiguousStrides(s)
		return fail("cudnnSetTensor4dDescriptorEx", c.cudnnSetTensor4dDescriptorEx(*dst, ddt,
			int32(s[0]), int32(s[1]), int32(s[2]), int32(s[3]), int32(st[0]), int32(st[1]), int32(st[2]), int32(st[3])))
	}
	if err := tensor(&d.x, x); err != nil {
		return nil, err
	}
	if err := tensor(&d.y, y); err != nil {
		return nil, err
	}
	if err := fail("cudnnCreateFilterDescriptor", c.cudnnCreateFilterDescriptor(&d.w)); err != nil {
		return nil, err
	}
	if err := fail("cudnnSetFilter4dDescriptor", c.cudnnSetFilter4dDescriptor(d.w, ddt, cudnnTensorNCHW,
		int32(w[0]), int32(w[1]), int32(w[2]), int32(w[3]))); err != nil {
		return nil, err
	}
	if err := fail("cudnnCreateConvolutionDescriptor", c.cudnnCreateConvDescriptor(&d.conv)); err != nil {
		return nil, err
	}
	if err := fail("cudnnSetConvolution2dDescriptor", c.cudnnSetConvolution2dDesc(d.conv, int32(p.PadH), int32(p.PadW),
		int32(p.StrideH), int32(p.StrideW), int32(p.DilationH), int32(p.DilationW), cudnnCrossCorrelation, compute)); err != nil {
		return nil, err
	}
	if err := fail("cudnnSetConvolutionGroupCount", c.cudnnSetConvolutionGroupCount(d.conv, int32(p.Groups))); err != nil {
		return nil, err
	}
	// cuDNN's default math lets float32 convolutions run on TF32 tensor
	// cores; FMA math keeps them exact unless TF32 was asked for.
	mt := int32(cudnnFMAMath)
	if dt == backend.Float16 || dt == backend.BFloat16 || (dt == backend.Float32 && tf32) {
		mt = cudnnTensorOpMath
	}
	if err := fail("cudnnSetConvolutionMathType", c.cudnnSetConvolutionMathType(d.conv, mt)); err != nil {
		return nil, err
	}
	return d, nil
}

func (c *cudnn) destroy(d *convDescs) {
	if d.x != 0 {
		c.cudnnDestroyTensorDescriptor(d.x)
	}
	if d.y != 0 {
		c.cudnnDestroyTensorDescriptor(d.y)
	}
	if d.w != 0 {
		c.cudnnDestroyFilterDescriptor(d.w)
	}
	if d.conv != 0 {
		c.cudnnDestroyConvDescriptor(d.conv)
	}
}

// pickAlgo reads the results of a cudnnFind*AlgorithmEx call (sorted by
// time, fastest first) and returns the first that succeeded.
func pickAlgo(perf []byte, n int) (convAlgo, bool) {
	le := binary.LittleEndian
	for i := 0; i < n; i++ {
		r := perf[i*cudnnPerfSize:]
		if int32(le.Uint32(r[cudnnPerfStatusOffset:])) != cudnnStatusSuccess {
			continue
		}
		t := math.Float32frombits(le.Uint32(r[cudnnPerfTimeOffset:]))
		if t < 0 {
			continue
		}
		return convAlgo{algo: int32(le.Uint32(r[cudnnPerfAlgoOffset:])), workspace: le.Uint64(r[cudnnPerfMemoryOffset:])}, true
	}
	return convAlgo{}, false
}

// cudnnScalars returns α and β in the precision cuDNN expects for dt
// (double for float64, float otherwise).
func cudnnScalars(dt backend.DType, alpha, beta float64) (unsafe.Pointer, unsafe.Pointer) {
	if dt == backend.Float64 {
		a, b := alpha, beta
		return unsafe.Pointer(&a), unsafe.Pointer(&b)
	}
	a, b := float32(alpha), float32(beta)
	return unsafe.Pointer(&a), unsafe.Pointer(&b)
}
