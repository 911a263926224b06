package backendtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/flockml/flock/backend"
)

// A check tests one kernel family of a backend.
type check struct {
	name string
	fn   func(e *Env)
}

var checks struct {
	sync.Mutex
	list []check
}

// register adds a family of checks to the suite; each file of the package
// registers its own from init.
func register(name string, fn func(e *Env)) {
	checks.Lock()
	defer checks.Unlock()
	checks.list = append(checks.list, check{name, fn})
}

// Run runs the whole conformance suite against b, one subtest per kernel
// family, each comparing the backend's results with a float64 reference
// computed here in plain Go.
func Run(t *testing.T, b backend.Backend) {
	checks.Lock()
	list := append([]check(nil), checks.list...)
	checks.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	for _, c := range list {
		t.Run(c.name, func(t *testing.T) {
			c.fn(&Env{T: t, B: b, Rand: rand.New(rand.NewPCG(1, uint64(len(c.name))))})
		})
	}
}

// Env is what a check works with: the test, the backend under test and a
// seeded source of random numbers.
type Env struct {
	T    *testing.T
	B    backend.Backend
	Rand *rand.Rand
}

// Alloc returns a contiguous view of a new buffer (filled with NaN for
// floats, to catch reads of unwritten memory).
func (e *Env) Alloc(dt backend.DType, shape backend.Shape) backend.View {
	return e.alloc(dt, shape, backend.ContiguousStrides(shape), 0)
}

func (e *Env) alloc(dt backend.DType, shape backend.Shape, strides []int, offset int) backend.View {
	e.T.Helper()
	span := offset + 1
	for i, d := range shape {
		if d == 0 {
			span = offset
			break
		}
		span += (d - 1) * strides[i]
	}
	buf, err := e.B.Alloc(max(span, 1) * dt.Size())
	if err != nil {
		e.T.Fatalf("alloc %v%v: %v", dt, shape, err)
	}
	e.T.Cleanup(func() { e.B.Free(buf) })
	v := backend.View{Buf: buf, DType: dt, Shape: shape.Clone(), Strides: append([]int(nil), strides...), Offset: offset}
	fill := make([]byte, buf.Size())
	if dt.IsFloat() {
		for i := 0; i+dt.Size() <= len(fill); i += dt.Size() {
			encode(fill[i:], dt, math.NaN())
		}
	}
	if err := e.B.Write(buf, 0, fill); err != nil {
		e.T.Fatalf("write: %v", err)
	}
	return v
}

// Strided returns a view of shape with gaps between elements and a non-zero
// offset, and, when the rank allows, its two last axes swapped in memory: a
// layout that a kernel must not treat as contiguous.
func (e *Env) Strided(dt backend.DType, shape backend.Shape) backend.View {
	r := len(shape)
	order := make([]int, r) // memory order: order[0] outermost
	for i := range order {
		order[i] = i
	}
	if r >= 2 {
		order[r-1], order[r-2] = order[r-2], order[r-1]
	}
	strides := make([]int, r)
	acc := 2 // every element followed by a gap
	for k := r - 1; k >= 0; k-- {
		a := order[k]
		strides[a] = acc
		acc *= max(shape[a], 1) + 1
	}
	return e.alloc(dt, shape, strides, 3)
}

// Random returns a view of shape (contiguous, or strided when strided is
// set) holding values drawn uniformly from [lo, hi) (integers for integer
// dtypes, 0/1 for Bool), and those values in row-major order.
func (e *Env) Random(dt backend.DType, shape backend.Shape, strided bool, lo, hi float64) (backend.View, []float64) {
	var v backend.View
	if strided {
		v = e.Strided(dt, shape)
	} else {
		v = e.Alloc(dt, shape)
	}
	vals := make([]float64, shape.NumElements())
	for i := range vals {
		x := lo + (hi-lo)*e.Rand.Float64()
		switch {
		case dt == backend.Bool:
			x = float64(e.Rand.IntN(2))
		case !dt.IsFloat():
			x = math.Floor(x)
		default:
			x = Round(dt, x)
		}
		vals[i] = x
	}
	e.Set(v, vals)
	return v, vals
}

// Set writes vals (row-major) into the elements of v.
func (e *Env) Set(v backend.View, vals []float64) {
	e.T.Helper()
	raw := make([]byte, v.Buf.Size())
	if err := e.B.Read(raw, v.Buf, 0); err != nil {
		e.T.Fatalf("read: %v", err)
	}
	each(v, func(i, off int) { encode(raw[off*v.DType.Size():], v.DType, vals[i]) })
	if err := e.B.Write(v.Buf, 0, raw); err != nil {
		e.T.Fatalf("write: %v", err)
	}
}

// Get reads the elements of v in row-major order as float64s.
func (e *Env) Get(v backend.View) []float64 {
	e.T.Helper()
	raw := make([]byte, v.Buf.Size())
	if err := e.B.Read(raw, v.Buf, 0); err != nil {
		e.T.Fatalf("read: %v", err)
	}
	out := make([]float64, v.NumElements())
	each(v, func(i, off int) { out[i] = decode(raw[off*v.DType.Size():], v.DType) })
	return out
}

// each calls fn with the row-major index and element offset of every element
// of v.
func each(v backend.View, fn func(i, off int)) {
	n := v.NumElements()
	idx := make([]int, len(v.Shape))
	for i := 0; i < n; i++ {
		off := v.Offset
		for a, x := range idx {
			off += x * v.Strides[a]
		}
		fn(i, off)
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < v.Shape[a] {
				break
			}
			idx[a] = 0
		}
	}
}

// Round returns x rounded to the precision of dt.
func Round(dt backend.DType, x float64) float64 {
	var b [8]byte
	encode(b[:], dt, x)
	return decode(b[:], dt)
}

func encode(b []byte, dt backend.DType, x float64) {
	le := binary.LittleEndian
	switch dt {
	case backend.Float32:
		le.PutUint32(b, math.Float32bits(float32(x)))
	case backend.Float64:
		le.PutUint64(b, math.Float64bits(x))
	case backend.Float16:
		le.PutUint16(b, f32ToF16(float32(x)))
	case backend.BFloat16:
		le.PutUint16(b, f32ToBF16(float32(x)))
	case backend.Int32:
		le.PutUint32(b, uint32(int32(x)))
	case backend.Int64:
		le.PutUint64(b, uint64(int64(x)))
	case backend.Uint8:
		b[0] = uint8(x)
	case backend.Bool:
		b[0] = 0
		if x != 0 {
			b[0] = 1
		}
	default:
		panic(fmt.Sprintf("backendtest: dtype %v", dt))
	}
}

func decode(b []byte, dt backend.DType) float64 {
	le := binary.LittleEndian
	switch dt {
	case backend.Float32:
		return float64(math.Float32frombits(le.Uint32(b)))
	case backend.Float64:
		return math.Float64frombits(le.Uint64(b))
	case backend.Float16:
		return float64(f16ToF32(le.Uint16(b)))
	case backend.BFloat16:
		return float64(math.Float32frombits(uint32(le.Uint16(b)) << 16))
	case backend.Int32:
		return float64(int32(le.Uint32(b)))
	case backend.Int64:
		return float64(int64(le.Uint64(b)))
	case backend.Uint8, backend.Bool:
		return float64(b[0])
	}
	panic(fmt.Sprintf("backendtest: dtype %v", dt))
}

// Close fails the test when got and want differ by more than
// atol + rtol·|want| anywhere (NaNs must match NaNs), reporting the first
// mismatches.
func (e *Env) Close(what string, got, want []float64, rtol, atol float64) {
	e.T.Helper()
	if len(got) != len(want) {
		e.T.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	bad := 0
	for i := range got {
		g, w := got[i], want[i]
		ok := (math.IsNaN(g) && math.IsNaN(w)) || g == w || math.Abs(g-w) <= atol+rtol*math.Abs(w)
		if !ok {
			if bad < 5 {
				e.T.Errorf("%s: element %d = %v, want %v", what, i, g, w)
			}
			bad++
		}
	}
	if bad > 5 {
		e.T.Errorf("%s: %d mismatches in all", what, bad)
	}
}

// Tol returns the relative tolerance for results of dtype dt.
func Tol(dt backend.DType) float64 {
	switch dt {
	case backend.Float64:
		return 1e-12
	case backend.Float32:
		return 1e-5
	}
	return 1e-2
}

// FloatTypes are the dtypes every float kernel must accept.
var FloatTypes = []backend.DType{backend.Float32, backend.Float64}

// Shapes of interest for elementwise work: empty, scalar, one element, odd
// and non-divisible sizes, and one large enough to be split across threads.
var Shapes = []backend.Shape{{}, {0}, {1}, {7}, {3, 0, 2}, {2, 3}, {5, 1, 7}, {4, 3, 2, 5}, {33, 65}, {3, 257, 129}}
