package cuda

import (
	"unsafe"
)

// driver holds the CUDA driver API functions the package calls, bound at run
// time from libcuda.so.1. Every function takes and returns integers and
// pointers only. Where the C header maps a name to a versioned symbol
// (cuMemAlloc → cuMemAlloc_v2), the versioned one is bound.
type driver struct {
	lib *Library

	cuInit                    func(flags uint32) cuResult
	cuDriverGetVersion        func(v *int32) cuResult
	cuGetErrorName            func(code cuResult, s **byte) cuResult
	cuGetErrorString          func(code cuResult, s **byte) cuResult
	cuDeviceGetCount          func(n *int32) cuResult
	cuDeviceGet               func(dev *int32, ordinal int32) cuResult
	cuDeviceGetName           func(name *byte, n int32, dev int32) cuResult
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) cuResult
	cuDeviceTotalMem          func(bytes *uint64, dev int32) cuResult
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) cuResult
	cuDevicePrimaryCtxRelease func(dev int32) cuResult
	cuCtxSetCurrent           func(ctx uintptr) cuResult
	cuCtxSynchronize          func() cuResult

	cuMemAlloc          func(p *uintptr, n uint64) cuResult
	cuMemFree           func(p uintptr) cuResult
	cuMemGetInfo        func(free, total *uint64) cuResult
	cuMemHostAlloc      func(p *unsafe.Pointer, n uint64, flags uint32) cuResult
	cuMemFreeHost       func(p unsafe.Pointer) cuResult
	cuMemcpyHtoDAsync   func(dst uintptr, src unsafe.Pointer, n uint64, stream uintptr) cuResult
	cuMemcpyDtoHAsync   func(dst unsafe.Pointer, src uintptr, n uint64, stream uintptr) cuResult
	cuMemcpyDtoDAsync   func(dst, src uintptr, n uint64, stream uintptr) cuResult
	cuMemsetD8Async     func(dst uintptr, v uint8, n uint64, stream uintptr) cuResult
	cuMemsetD32Async    func(dst uintptr, v uint32, n uint64, stream uintptr) cuResult
	cuStreamCreate      func(s *uintptr, flags uint32) cuResult
	cuStreamDestroy     func(s uintptr) cuResult
	cuStreamSynchronize func(s uintptr) cuResult
	cuStreamWaitEvent   func(s, e uintptr, flags uint32) cuResult
	cuEventCreate       func(e *uintptr, flags uint32) cuResult
	cuEventDestroy      func(e uintptr) cuResult
	cuEventRecord       func(e, s uintptr) cuResult
	cuEventQuery        func(e uintptr) cuResult
	cuEventSynchronize  func(e uintptr) cuResult
	cuEventElapsedTime  func(ms *float32, start, end uintptr) cuResult

	cuModuleLoadDataEx  func(m *uintptr, image unsafe.Pointer, nopt uint32, opts *int32, vals *uintptr) cuResult
	cuModuleUnload      func(m uintptr) cuResult
	cuModuleGetFunction func(f *uintptr, m uintptr, name *byte) cuResult
	cuFuncGetAttribute  func(v *int32, attr int32, f uintptr) cuResult
	// cuLaunchKernel's kernelParams is always nil: arguments travel in one
	// buffer through extra.
	cuLaunchKernel func(f uintptr, gx, gy, gz, bx, by, bz, shmem uint32, stream uintptr, params unsafe.Pointer, extra *uintptr) cuResult
}

// Device attributes (CUdevice_attribute) the package reads.
const (
	attrMaxThreadsPerBlock   = 1
	attrMaxSharedPerBlock    = 8
	attrWarpSize             = 10
	attrClockRate            = 13
	attrMultiprocessorCount  = 16
	attrPCIBusID             = 33
	attrMemoryClockRate      = 36
	attrGlobalMemoryBusWidth = 37
	attrComputeMajor         = 75
	attrComputeMinor         = 76
)

// Function attributes.
const funcAttrMaxThreadsPerBlock = 0 // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK

// Flags.
const (
	streamNonBlocking     = 1 // CU_STREAM_NON_BLOCKING
	eventDisableTiming    = 2 // CU_EVENT_DISABLE_TIMING
	memHostAllocPortable  = 1 // CU_MEMHOSTALLOC_PORTABLE
	jitErrorLogBuffer     = 5 // CU_JIT_ERROR_LOG_BUFFER
	jitErrorLogBufferSize = 6 // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
)

// Launch-parameter markers of cuLaunchKernel's extra array.
const (
	launchParamEnd           = 0 // CU_LAUNCH_PARAM_END
	launchParamBufferPointer = 1 // CU_LAUNCH_PARAM_BUFFER_POINTER
	launchParamBufferSize    = 2 // CU_LAUNCH_PARAM_BUFFER_SIZE
)

// bindDriver binds the driver API of lib. A driver that lacks any of the
// functions is too old to use.
func bindDriver(lib *Library) (*driver, error) {
	d := &driver{lib: lib}
	b := &Binder{Lib: lib}
	b.Bind(&d.cuInit, "cuInit")
	b.Bind(&d.cuDriverGetVersion, "cuDriverGetVersion")
	b.Bind(&d.cuGetErrorName, "cuGetErrorName")
	b.Bind(&d.cuGetErrorString, "cuGetErrorString")
	b.Bind(&d.cuDeviceGetCount, "cuDeviceGetCount")
	b.Bind(&d.cuDeviceGet, "cuDeviceGet")
	b.Bind(&d.cuDeviceGetName, "cuDeviceGetName")
	b.Bind(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute")
	b.Bind(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2")
	b.Bind(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
	b.Bind(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
	b.Bind(&d.cuCtxSetCurrent, "cuCtxSetCurrent")
	b.Bind(&d.cuCtxSynchronize, "cuCtxSynchronize")
	b.Bind(&d.cuMemAlloc, "cuMemAlloc_v2")
	b.Bind(&d.cuMemFree, "cuMemFree_v2")
	b.Bind(&d.cuMemGetInfo, "cuMemGetInfo_v2")
	b.Bind(&d.cuMemHostAlloc, "cuMemHostAlloc")
	b.Bind(&d.cuMemFreeHost, "cuMemFreeHost")
	b.Bind(&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	b.Bind(&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	b.Bind(&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	b.Bind(&d.cuMemsetD8Async, "cuMemsetD8Async")
	b.Bind(&d.cuMemsetD32Async, "cuMemsetD32Async")
	b.Bind(&d.cuStreamCreate, "cuStreamCreate")
	b.Bind(&d.cuStreamDestroy, "cuStreamDestroy_v2")
	b.Bind(&d.cuStreamSynchronize, "cuStreamSynchronize")
	b.Bind(&d.cuStreamWaitEvent, "cuStreamWaitEvent")
	b.Bind(&d.cuEventCreate, "cuEventCreate")
	b.Bind(&d.cuEventDestroy, "cuEventDestroy_v2")
	b.Bind(&d.cuEventRecord, "cuEventRecord")
	b.Bind(&d.cuEventQuery, "cuEventQuery")
	b.Bind(&d.cuEventSynchronize, "cuEventSynchronize")
	b.Bind(&d.cuEventElapsedTime, "cuEventElapsedTime")
	b.Bind(&d.cuModuleLoadDataEx, "cuModuleLoadDataEx")
	b.Bind(&d.cuModuleUnload, "cuModuleUnload")
	b.Bind(&d.cuModuleGetFunction, "cuModuleGetFunction")
	b.Bind(&d.cuFuncGetAttribute, "cuFuncGetAttribute")
	b.Bind(&d.cuLaunchKernel, "cuLaunchKernel")
	if err := b.Err(); err != nil {
		return nil, err
	}
	return d, nil
}

// attr reads a device attribute (0 when the driver cannot say).
func (d *driver) attr(dev int32, a int32) int {
	var v int32
	if d.cuDeviceGetAttribute(&v, a, dev) != cuSuccess {
		return 0
	}
	return int(v)
}
