package cuda

import (
	"fmt"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// Error is a failed call of the CUDA driver or of one of the libraries: the
// function called, the library's status code and its description.
type Error struct {
	Call string // the function, as named in the C API ("cuMemAlloc")
	Code int    // the CUresult (or cublasStatus_t, nvrtcResult, ...)
	Name string // the code's symbolic name when known ("CUDA_ERROR_OUT_OF_MEMORY")
	Desc string // the library's description ("out of memory")
}

// Error formats as "cuMemAlloc: out of memory (2)".
func (e *Error) Error() string {
	d := e.Desc
	if d == "" {
		d = e.Name
	}
	if d == "" {
		d = "error"
	}
	return fmt.Sprintf("%s: %s (%d)", e.Call, d, e.Code)
}

// Is makes errors.Is(err, ErrOutOfMemory) hold for the out-of-memory codes of
// the driver and of cuBLAS.
func (e *Error) Is(target error) bool {
	return target == ErrOutOfMemory && (e.Name == "CUDA_ERROR_OUT_OF_MEMORY" || e.Name == "CUBLAS_STATUS_ALLOC_FAILED")
}

// ErrOutOfMemory is matched (errors.Is) by every failure to allocate device
// memory: backend.ErrOutOfMemory, which callers that know no device check.
var ErrOutOfMemory = backend.ErrOutOfMemory

// cuResult is the driver's status code (CUresult).
type cuResult = int32

// Driver status codes that the package acts on or describes without the
// driver's help (when cuGetErrorString itself is unavailable).
const (
	cuSuccess     = 0
	cuErrOutOfMem = 2
	cuErrNotReady = 600
)

var driverCodes = map[int]struct{ name, desc string }{
	0:   {"CUDA_SUCCESS", "no error"},
	1:   {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	2:   {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	3:   {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	4:   {"CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	34:  {"CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	46:  {"CUDA_ERROR_DEVICES_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
	100: {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	101: {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	200: {"CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	201: {"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	209: {"CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	218: {"CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	222: {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
	400: {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	500: {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	600: {"CUDA_ERROR_NOT_READY", "device not ready"},
	700: {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	701: {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	702: {"CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
	719: {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	999: {"CUDA_ERROR_UNKNOWN", "unknown error"},
}

// describeDriver returns the name and description of a CUresult, from the
// driver when it can say, otherwise from the table above.
func describeDriver(d *driver, code cuResult) (name, desc string) {
	if d != nil && d.cuGetErrorName != nil && d.cuGetErrorString != nil {
		var n, s *byte
		if d.cuGetErrorName(code, &n) == cuSuccess {
			name = goString(n)
		}
		if d.cuGetErrorString(code, &s) == cuSuccess {
			desc = goString(s)
		}
	}
	if c, ok := driverCodes[int(code)]; ok {
		if name == "" {
			name = c.name
		}
		if desc == "" {
			desc = c.desc
		}
	}
	return name, desc
}

// check turns a CUresult into nil or an *Error naming call.
func (d *driver) check(call string, code cuResult) error {
	if code == cuSuccess {
		return nil
	}
	name, desc := describeDriver(d, code)
	return &Error{Call: call, Code: int(code), Name: name, Desc: desc}
}

// goString copies the NUL-terminated C string at p.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns s as a NUL-terminated byte slice for a C call.
func cString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}
