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
// for scalars and pointers, 8 for arrays of 64-bit values), and the total
// rounded up to the largest alignment. cuLaunchKernel receives the buffer
// through its extra argument (CU_LAUNCH_PARAM_BUFFER_POINTER,
// CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END), so one call carries any
// number of arguments and only integers and pointers cross into C.
type Args struct {
	buf    []byte
	params []Param
	align  int
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
	a.align = 1
}

// place reserves size bytes aligned to align and returns them.
func (a *Args) place(size, align int) []byte {
	if a.align < align {
		a.align = align
	}
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

// Size is the size of the packed buffer, rounded up to its alignment as the
// compiler rounds a struct of the same members.
func (a *Args) Size() int {
	al := max(a.align, 1)
	return (len(a.buf) + al - 1) &^ (al - 1)
}

// Bytes returns the packed buffer, padded to Size.
func (a *Args) Bytes() []byte {
	for len(a.buf) < a.Size() {
		a.buf = append(a.buf, 0)
	}
	return a.buf
}

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
