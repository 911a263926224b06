package cuda

import (
	"fmt"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// cublas is the part of cuBLAS the backend uses: one handle bound to the
// compute stream and the strided-batched mixed-precision GEMM.
type cublas struct {
	lib    *Library
	handle uintptr

	cublasCreate         func(h *uintptr) int32
	cublasDestroy        func(h uintptr) int32
	cublasGetVersion     func(h uintptr, v *int32) int32
	cublasSetStream      func(h, stream uintptr) int32
	cublasSetMathMode    func(h uintptr, mode int32) int32
	cublasGetStatusName  func(status int32) string
	cublasGetStatusStr   func(status int32) string
	cublasGemmStridedBEx func(h uintptr, transa, transb int32, m, n, k int32,
		alpha unsafe.Pointer, a uintptr, atype int32, lda int32, strideA int64,
		b uintptr, btype int32, ldb int32, strideB int64,
		beta unsafe.Pointer, c uintptr, ctype int32, ldc int32, strideC int64,
		batch int32, compute int32, algo int32) int32
}

// cuBLAS and CUDA library enumerations.
const (
	cublasOpN = 0
	cublasOpT = 1

	cublasDefaultMath    = 0
	cublasTF32TensorMath = 3

	cudaR32F  = 0
	cudaR64F  = 1
	cudaR16F  = 2
	cudaR16BF = 14

	cublasCompute32F = 68
	cublasCompute64F = 70

	cublasGemmDefault = -1
)

func loadCUBLAS() (*cublas, error) {
	lib, err := Open(CUBLAS)
	if err != nil {
		return nil, err
	}
	c := &cublas{lib: lib}
	b := &Binder{Lib: lib}
	b.Bind(&c.cublasCreate, "cublasCreate_v2")
	b.Bind(&c.cublasDestroy, "cublasDestroy_v2")
	b.Bind(&c.cublasGetVersion, "cublasGetVersion_v2")
	b.Bind(&c.cublasSetStream, "cublasSetStream_v2")
	b.Bind(&c.cublasSetMathMode, "cublasSetMathMode")
	b.Bind(&c.cublasGemmStridedBEx, "cublasGemmStridedBatchedEx")
	if err := b.Err(); err != nil {
		return nil, err
	}
	// Names of statuses exist from CUDA 11.4 on; without them the code is
	// reported alone.
	opt := &Binder{Lib: lib}
	opt.Bind(&c.cublasGetStatusName, "cublasGetStatusName")
	opt.Bind(&c.cublasGetStatusStr, "cublasGetStatusString")
	return c, nil
}

func (c *cublas) check(call string, status int32) error {
	if status == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(status)}
	if c.cublasGetStatusName != nil {
		e.Name = c.cublasGetStatusName(status)
	}
	if c.cublasGetStatusStr != nil {
		e.Desc = c.cublasGetStatusStr(status)
	}
	return e
}

// init creates the handle on the current context and binds it to stream.
func (c *cublas) init(stream uintptr, tf32 bool) error {
	if err := c.check("cublasCreate", c.cublasCreate(&c.handle)); err != nil {
		return err
	}
	if err := c.check("cublasSetStream", c.cublasSetStream(c.handle, stream)); err != nil {
		return err
	}
	return c.setTF32(tf32)
}

// setTF32 lets float32 products use TF32 tensor cores (10-bit mantissa
// inputs, float32 accumulation) or forbids it.
func (c *cublas) setTF32(on bool) error {
	mode := int32(cublasDefaultMath)
	if on {
		mode = cublasTF32TensorMath
	}
	return c.check("cublasSetMathMode", c.cublasSetMathMode(c.handle, mode))
}

// Version is cuBLAS's version as "12.4.5".
func (c *cublas) Version() string {
	var v int32
	if c.handle == 0 || c.cublasGetVersion(c.handle, &v) != 0 {
		return "?"
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
}

// gemmOperand is one matrix of a column-major GEMM: its device address, its
// cudaDataType, leading dimension and batch stride, in elements.
type gemmOperand struct {
	ptr    uintptr
	dtype  int32
	ld     int
	stride int
}

// gemm runs C = α·op(A)·op(B) + β·C over batch column-major matrices (C is
// m×n), computing in float32 (float64 when every operand is float64).
func (c *cublas) gemm(transA, transB bool, m, n, k int, alpha float64, a, b gemmOperand, beta float64, cc gemmOperand, batch int) error {
	op := func(t bool) int32 {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	compute := int32(cublasCompute32F)
	var ap, bp unsafe.Pointer
	if a.dtype == cudaR64F && b.dtype == cudaR64F && cc.dtype == cudaR64F {
		compute = cublasCompute64F
		al, be := alpha, beta
		ap, bp = unsafe.Pointer(&al), unsafe.Pointer(&be)
	} else {
		al, be := float32(alpha), float32(beta)
		ap, bp = unsafe.Pointer(&al), unsafe.Pointer(&be)
	}
	return c.check("cublasGemmStridedBatchedEx", c.cublasGemmStridedBEx(c.handle, op(transA), op(transB),
		int32(m), int32(n), int32(k),
		ap, a.ptr, a.dtype, int32(a.ld), int64(a.stride),
		b.ptr, b.dtype, int32(b.ld), int64(b.stride),
		bp, cc.ptr, cc.dtype, int32(cc.ld), int64(cc.stride),
		int32(batch), compute, cublasGemmDefault))
}

// cudaDataType returns the cudaDataType of a float dtype.
func cudaDataType(dt backend.DType) (int32, bool) {
	switch dt {
	case backend.Float32:
		return cudaR32F, true
	case backend.Float64:
		return cudaR64F, true
	case backend.Float16:
		return cudaR16F, true
	case backend.BFloat16:
		return cudaR16BF, true
	}
	return 0, false
}
