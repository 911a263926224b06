package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Args packs the arguments of one kernel launch into a single buffer, laid
// out as the CUDA compiler lays out the kernel's parameter list: each
// argument at the next offset that is a multiple of its alignment (its size
// for scalars and pointers, 8 for arrays of 64-bit values). cuLaunchKernel
// receives the buffer through its extra argument
// (CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE,
// CU_LAUNCH_PARAM_END), so one call carries any number of arguments and only
// integers and pointers cross into C.
//
// The size given to the driver ends at the last parameter's last byte, with
// no tail padding: the driver compares it with the kernel's parameter space
// and refuses any other size with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ("too
// many resources requested for launch"), as a kernel (T *y, const T *x,
// long long n, int flag) of 28 bytes, sent as 32, showed on the first GPU
// run (see llvm/llvm-project#156229).
type Args struct {
	buf    []byte
	params []Param
}

// Param describes one packed argument: its offset, size and alignment, the
// form in which it appears in a PTX parameter list.
type Param struct {
	Offset, Size, Align int
}

// Reset empties a for reuse.
func (a *Args) Reset() {
	a.buf = a.buf[:0]
	a.params = a.params[:0]
}

// place reserves size bytes aligned to align and returns them.
func (a *Args) place(size, align int) []byte {
	off := (len(a.buf) + align - 1) &^ (align - 1)
	for len(a.buf) < off+size {
		a.buf = append(a.buf, 0)
	}
	a.params = append(a.params, Param{Offset: off, Size: size, Align: align})
	return a.buf[off : off+size]
}

// Ptr adds a device pointer (CUdeviceptr, 8 bytes).
func (a *Args) Ptr(p uintptr) *Args {
	binary.LittleEndian.PutUint64(a.place(8, 8), uint64(p))
	return a
}

// I32 adds a 32-bit integer (int).
func (a *Args) I32(v int32) *Args {
	binary.LittleEndian.PutUint32(a.place(4, 4), uint32(v))
	return a
}

// Int adds a Go int as a 32-bit int, for values known to fit.
func (a *Args) Int(v int) *Args {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(fmt.Sprintf("cuda: kernel argument %d does not fit in 32 bits", v))
	}
	return a.I32(int32(v))
}

// I64 adds a 64-bit integer (long long).
func (a *Args) I64(v int64) *Args {
	binary.LittleEndian.PutUint64(a.place(8, 8), uint64(v))
	return a
}

// U64 adds an unsigned 64-bit integer (unsigned long long).
func (a *Args) U64(v uint64) *Args {
	binary.LittleEndian.PutUint64(a.place(8, 8), v)
	return a
}

// F32 adds a float.
func (a *Args) F32(v float32) *Args {
	binary.LittleEndian.PutUint32(a.place(4, 4), math.Float32bits(v))
	return a
}

// F64 adds a double.
func (a *Args) F64(v float64) *Args {
	binary.LittleEndian.PutUint64(a.place(8, 8), math.Float64bits(v))
	return a
}

// I64s adds a struct of n long longs passed by value (struct { long long
// v[n]; }), holding vals followed by zeros.
func (a *Args) I64s(vals []int64, n int) *Args {
	if len(vals) > n {
		panic(fmt.Sprintf("cuda: %d values for an array argument of %d", len(vals), n))
	}
	b := a.place(8*n, 8)
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return a
}

// Size is the size of the packed buffer: the end of the last argument,
// without the tail padding a struct of the same members would have.
func (a *Args) Size() int { return len(a.buf) }

// Bytes returns the packed buffer, Size bytes.
func (a *Args) Bytes() []byte { return a.buf }

// Params lists the packed arguments in order.
func (a *Args) Params() []Param { return a.params }

// String describes the layout, as "ptr@0 i32@8 ...", for error messages.
func (a *Args) String() string {
	var b strings.Builder
	for i, p := range a.params {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d/%d@%d", p.Size, p.Align, p.Offset)
	}
	return b.String()
}
