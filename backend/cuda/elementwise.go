package cuda

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/internal/float16"
)

// maxDims is the most axes a strided kernel walks (MAXD in common.cuh), after
// merging.
const maxDims = 8

// layout is a walk of up to four views of one shape in lockstep: axes of
// extent 1 dropped and adjacent axes that are contiguous in every operand
// merged, so that contiguous work is a single axis.
type layout struct {
	shape   []int64
	strides [][]int64
	n       int
}

func coalesce(shape backend.Shape, views ...backend.View) (layout, error) {
	l := layout{strides: make([][]int64, len(views)), n: shape.NumElements()}
	for d, ext := range shape {
		if ext == 1 {
			continue
		}
		r := len(l.shape)
		if r > 0 {
			merge := true
			for i, v := range views {
				if l.strides[i][r-1] != int64(v.Strides[d]*ext) {
					merge = false
					break
				}
			}
			if merge {
				l.shape[r-1] *= int64(ext)
				for i, v := range views {
					l.strides[i][r-1] = int64(v.Strides[d])
				}
				continue
			}
		}
		l.shape = append(l.shape, int64(ext))
		for i, v := range views {
			l.strides[i] = append(l.strides[i], int64(v.Strides[d]))
		}
	}
	if len(l.shape) == 0 {
		l.shape = []int64{1}
		for i := range views {
			l.strides[i] = []int64{0}
		}
	}
	if len(l.shape) > maxDims {
		return l, fmt.Errorf("cuda: a layout of shape %v needs %d axes after merging; kernels walk at most %d", shape, len(l.shape), maxDims)
	}
	return l, nil
}

// pack adds the walk to a: the element count, the rank, the shape and each
// operand's strides.
func (l layout) pack(a *Args) {
	a.I64(int64(l.n)).Int(len(l.shape)).I64s(l.shape, maxDims)
	for _, s := range l.strides {
		a.I64s(s, maxDims)
	}
}

// Copy implements backend.Backend for every pair of dtypes, with
// conversions as the CPU backend makes them. One of dst and src may be host
// memory (a backend.HostBuffer): the host side is gathered into (or
// scattered from) a contiguous staging copy.
func (b *Backend) Copy(dst, src backend.View) error {
	if !dst.Shape.Equal(src.Shape) {
		return fmt.Errorf("cuda: copy: dst shape %v, src shape %v", dst.Shape, src.Shape)
	}
	_, dstHost := dst.Buf.(backend.HostBuffer)
	_, srcHost := src.Buf.(backend.HostBuffer)
	switch {
	case srcHost && !dstHost:
		return b.copyFromHost(dst, src)
	case dstHost && !srcHost:
		return b.copyToHost(dst, src)
	}
	if err := b.checkSame("copy", dst, []string{"src"}, src); err != nil {
		return err
	}
	n := dst.NumElements()
	if n == 0 {
		return nil
	}
	if dst.DType == src.DType && dst.IsContiguous() && src.IsContiguous() {
		return b.eng.copyDevice(b.ptr(dst), b.ptr(src), n*dst.DType.Size())
	}
	l, err := coalesce(dst.Shape, dst, src)
	if err != nil {
		return err
	}
	a := new(Args)
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(src))
	l.pack(a)
	return b.launchN("elementwise", "copy_"+typeTag(dst.DType)+"_"+typeTag(src.DType), n, a)
}

// hostElements calls fn with the byte offset of each element of a host view
// in row-major order.
func hostElements(v backend.View, fn func(off int)) {
	n := v.NumElements()
	idx := make([]int, len(v.Shape))
	es := v.DType.Size()
	for i := 0; i < n; i++ {
		off := v.Offset
		for a, x := range idx {
			off += x * v.Strides[a]
		}
		fn(off * es)
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < v.Shape[a] {
				break
			}
			idx[a] = 0
		}
	}
}

func (b *Backend) copyFromHost(dst, src backend.View) error {
	if err := b.checkView("copy", "dst", dst); err != nil {
		return err
	}
	n := src.NumElements()
	if n == 0 {
		return nil
	}
	hb := src.Buf.(backend.HostBuffer).Bytes()
	es := src.DType.Size()
	var raw []byte
	if src.IsContiguous() {
		raw = hb[src.Offset*es : (src.Offset+n)*es]
	} else {
		raw = make([]byte, 0, n*es)
		hostElements(src, func(off int) { raw = append(raw, hb[off:off+es]...) })
	}
	tmp, release, err := b.scratchView(src.DType, src.Shape)
	if err != nil {
		return err
	}
	defer release()
	if err := b.eng.upload(b.ptr(tmp), raw); err != nil {
		return err
	}
	return b.Copy(dst, tmp)
}

func (b *Backend) copyToHost(dst, src backend.View) error {
	if err := b.checkView("copy", "src", src); err != nil {
		return err
	}
	n := src.NumElements()
	if n == 0 {
		return nil
	}
	tmp, release, err := b.scratchView(dst.DType, dst.Shape)
	if err != nil {
		return err
	}
	defer release()
	if err := b.Copy(tmp, src); err != nil {
		return err
	}
	es := dst.DType.Size()
	raw := make([]byte, n*es)
	if err := b.eng.download(raw, b.ptr(tmp)); err != nil {
		return err
	}
	hb := dst.Buf.(backend.HostBuffer).Bytes()
	if dst.IsContiguous() {
		copy(hb[dst.Offset*es:], raw)
		return nil
	}
	i := 0
	hostElements(dst, func(off int) { copy(hb[off:off+es], raw[i:i+es]); i += es })
	return nil
}

// fillBits is value converted to dt, as the bit pattern fill_<dt> stores.
func fillBits(dt backend.DType, value float64) (uint64, error) {
	switch dt {
	case backend.Float32:
		return uint64(math.Float32bits(float32(value))), nil
	case backend.Float64:
		return math.Float64bits(value), nil
	case backend.Float16:
		return uint64(float16.FromFloat32(float32(value))), nil
	case backend.BFloat16:
		return uint64(float16.BFloat16FromFloat32(float32(value))), nil
	case backend.Int32:
		return uint64(uint32(int32(value))), nil
	case backend.Int64:
		return uint64(int64(value)), nil
	case backend.Uint8:
		return uint64(uint8(value)), nil
	case backend.Bool:
		if value != 0 {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("cuda: fill: dtype %v", dt)
}

// Fill implements backend.Backend for every dtype; dst may have any
// strides.
func (b *Backend) Fill(dst backend.View, value float64) error {
	if err := b.checkView("fill", "dst", dst); err != nil {
		return err
	}
	bits, err := fillBits(dst.DType, value)
	if err != nil {
		return err
	}
	n := dst.NumElements()
	if n == 0 {
		return nil
	}
	l, err := coalesce(dst.Shape, dst)
	if err != nil {
		return err
	}
	a := new(Args)
	a.Ptr(b.ptr(dst)).U64(bits)
	l.pack(a)
	return b.launchN("elementwise", "fill_"+typeTag(dst.DType), n, a)
}

func intUnary(op backend.UnaryOp) bool {
	switch op {
	case backend.Neg, backend.Abs, backend.Sign, backend.Square, backend.ReLU:
		return true
	}
	return false
}

// Unary implements backend.Backend: every op on Float32 and Float64 (float32
// in float32 arithmetic, within a few ulp of the CPU's float64-then-round);
// Neg, Abs, Sign, Square and ReLU also on Int32 and Int64.
func (b *Backend) Unary(op backend.UnaryOp, dst, x backend.View, arg float64) error {
	if err := b.checkSame("unary", dst, []string{"x"}, x); err != nil {
		return err
	}
	if dst.DType != x.DType {
		return fmt.Errorf("cuda: unary: dst dtype %v, x dtype %v", dst.DType, x.DType)
	}
	if op > backend.MulScalar {
		return fmt.Errorf("cuda: unary: unknown op %d", op)
	}
	switch dst.DType {
	case backend.Float32, backend.Float64:
	case backend.Int32, backend.Int64:
		if !intUnary(op) {
			return fmt.Errorf("cuda: unary: op %d on %v", op, dst.DType)
		}
	default:
		return fmt.Errorf("cuda: unary: dtype %v", dst.DType)
	}
	l, err := coalesce(dst.Shape, dst, x)
	if err != nil {
		return err
	}
	a := new(Args)
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(x)).Int(int(op)).F64(arg)
	l.pack(a)
	return b.launchN("elementwise", "unary_"+typeTag(dst.DType), dst.NumElements(), a)
}

// Binary implements backend.Backend: every op on Float32 and Float64, the
// activation gradients (ReLUGrad … SigmoidGrad, computed in float64 as the
// CPU backend does) included; Add, Sub, Mul, Maximum, Minimum and the
// comparisons on Int32 and Int64. Maximum and Minimum propagate NaN.
func (b *Backend) Binary(op backend.BinaryOp, dst, x, y backend.View) error {
	if err := b.checkSame("binary", dst, []string{"a", "b"}, x, y); err != nil {
		return err
	}
	if x.DType != y.DType {
		return fmt.Errorf("cuda: binary: a dtype %v, b dtype %v", x.DType, y.DType)
	}
	if op > backend.SigmoidGrad {
		return fmt.Errorf("cuda: binary: unknown op %d", op)
	}
	switch x.DType {
	case backend.Float32, backend.Float64:
	case backend.Int32, backend.Int64:
		if op == backend.Div || op == backend.Pow || op.IsActivationGrad() {
			return fmt.Errorf("cuda: binary: op %d on %v", op, x.DType)
		}
	default:
		return fmt.Errorf("cuda: binary: dtype %v", x.DType)
	}
	name := "binary_"
	if op.IsComparison() {
		if dst.DType != backend.Bool {
			return fmt.Errorf("cuda: binary: comparison into %v, want bool", dst.DType)
		}
		name = "compare_"
	} else if dst.DType != x.DType {
		return fmt.Errorf("cuda: binary: dst dtype %v, operands %v", dst.DType, x.DType)
	}
	l, err := coalesce(dst.Shape, dst, x, y)
	if err != nil {
		return err
	}
	a := new(Args)
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(x)).Ptr(b.ptr(y)).Int(int(op))
	l.pack(a)
	return b.launchN("elementwise", name+typeTag(x.DType), dst.NumElements(), a)
}

// Where implements backend.Backend for every dtype.
func (b *Backend) Where(dst, cond, x, y backend.View) error {
	if err := b.checkSame("where", dst, []string{"cond", "a", "b"}, cond, x, y); err != nil {
		return err
	}
	if cond.DType != backend.Bool {
		return fmt.Errorf("cuda: where: cond is %v, want bool", cond.DType)
	}
	if x.DType != dst.DType || y.DType != dst.DType {
		return fmt.Errorf("cuda: where: dst %v, a %v, b %v", dst.DType, x.DType, y.DType)
	}
	l, err := coalesce(dst.Shape, dst, cond, x, y)
	if err != nil {
		return err
	}
	a := new(Args)
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(cond)).Ptr(b.ptr(x)).Ptr(b.ptr(y))
	l.pack(a)
	return b.launchN("elementwise", "where_"+typeTag(dst.DType), dst.NumElements(), a)
}
