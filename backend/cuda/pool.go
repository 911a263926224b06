package cuda

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// poolGeom is a validated 2-D pooling (or convolution window) geometry, in
// the order the kernels read it (PoolGeom in pool.cu).
type poolGeom struct {
	planes                 int
	h, w, oh, ow           int
	kh, kw, sh, sw, ph, pw int
	dh, dw                 int
	includePad             bool
}

// pack adds the geometry as two Dims.
func (g poolGeom) pack(a *Args) {
	a.I64s([]int64{int64(g.h), int64(g.w), int64(g.oh), int64(g.ow), int64(g.kh), int64(g.kw), int64(g.sh), int64(g.sw)}, maxDims)
	a.I64s([]int64{int64(g.ph), int64(g.pw), int64(g.dh), int64(g.dw)}, maxDims)
}

func (b *Backend) poolGeometry(kernel string, op backend.PoolOp, x, y, indices backend.View, p backend.PoolParams) (poolGeom, error) {
	var g poolGeom
	fail := func(format string, args ...any) (poolGeom, error) {
		return g, fmt.Errorf("cuda: %s: x%v, y%v, %+v: %s", kernel, x.Shape, y.Shape, p, fmt.Sprintf(format, args...))
	}
	dt := x.DType
	if dt != backend.Float32 && dt != backend.Float64 {
		return fail("dtype %v, want float32 or float64", dt)
	}
	if y.DType != dt {
		return fail("dtypes %v and %v differ", x.DType, y.DType)
	}
	if len(x.Shape) != 4 || len(y.Shape) != 4 {
		return fail("operands must be 4-D")
	}
	switch op {
	case backend.MaxPool:
		if indices.IsZero() || indices.DType != backend.Int64 || !indices.Shape.Equal(y.Shape) {
			return fail("max pooling needs int64 indices of the output's shape")
		}
	case backend.AvgPool:
		if !indices.IsZero() {
			return fail("average pooling takes no indices")
		}
		if p.DilationH != 1 || p.DilationW != 1 {
			return fail("average pooling has no dilation (set it to 1)")
		}
	default:
		return fail("unknown pooling op %d", op)
	}
	views := []backend.View{x, y}
	if !indices.IsZero() {
		views = append(views, indices)
	}
	for i, v := range views {
		if err := b.checkView(kernel, fmt.Sprintf("operand %d", i), v); err != nil {
			return g, err
		}
		if !v.IsContiguous() {
			return fail("operand %d is not contiguous", i)
		}
	}
	if p.KernelH < 1 || p.KernelW < 1 || p.StrideH < 1 || p.StrideW < 1 || p.DilationH < 1 || p.DilationW < 1 {
		return fail("kernel, stride and dilation must be ≥ 1")
	}
	if p.PadH < 0 || p.PadW < 0 || p.PadH > p.KernelH/2 || p.PadW > p.KernelW/2 {
		return fail("padding must be between 0 and half the kernel")
	}
	g = poolGeom{
		planes: x.Shape[0] * x.Shape[1], h: x.Shape[2], w: x.Shape[3],
		kh: p.KernelH, kw: p.KernelW, sh: p.StrideH, sw: p.StrideW,
		ph: p.PadH, pw: p.PadW, dh: p.DilationH, dw: p.DilationW,
		includePad: p.CountIncludePad,
	}
	g.oh, g.ow = p.OutputSize(g.h, g.w)
	if g.oh < 1 || g.ow < 1 || g.h+2*g.ph < g.dh*(g.kh-1)+1 || g.w+2*g.pw < g.dw*(g.kw-1)+1 {
		return fail("the window does not fit the padded input")
	}
	if want := (backend.Shape{x.Shape[0], x.Shape[1], g.oh, g.ow}); !y.Shape.Equal(want) {
		return fail("output shape must be %v", want)
	}
	return g, nil
}

// Pool2d implements backend.Backend with PyTorch's semantics (as the CPU
// backend): padding never wins a maximum, ties keep the first position, a
// NaN wins; averages divide by the window clipped to the padded input
// (CountIncludePad) or to the input.
func (b *Backend) Pool2d(op backend.PoolOp, dst, indices, x backend.View, p backend.PoolParams) error {
	g, err := b.poolGeometry("pool2d", op, x, dst, indices, p)
	if err != nil {
		return err
	}
	total := g.planes * g.oh * g.ow
	t := typeTag(x.DType)
	a := new(Args)
	if op == backend.MaxPool {
		a.Ptr(b.ptr(dst)).Ptr(b.ptr(indices)).Ptr(b.ptr(x)).I64(int64(total))
		g.pack(a)
		return b.launchN("pool", "pool_max_"+t, total, a)
	}
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(x)).I64(int64(total))
	g.pack(a)
	a.Int(boolInt(g.includePad))
	return b.launchN("pool", "pool_avg_"+t, total, a)
}

// Pool2dBackward implements backend.Backend. Max pooling adds each dy at
// its index (atomically: equal sums up to the order of float additions);
// average pooling gathers, per input element, the shares of the windows
// that cover it. An index outside its plane is an error.
func (b *Backend) Pool2dBackward(op backend.PoolOp, dx, dy, indices backend.View, p backend.PoolParams) error {
	g, err := b.poolGeometry("pool2d_backward", op, dx, dy, indices, p)
	if err != nil {
		return err
	}
	t := typeTag(dx.DType)
	if op == backend.AvgPool {
		total := g.planes * g.h * g.w
		a := new(Args)
		a.Ptr(b.ptr(dx)).Ptr(b.ptr(dy)).I64(int64(total))
		g.pack(a)
		a.Int(boolInt(g.includePad))
		return b.launchN("pool", "pool_avg_back_"+t, total, a)
	}
	if err := b.eng.zero(b.ptr(dx), dx.NumElements()*dx.DType.Size()); err != nil {
		return err
	}
	total := g.planes * g.oh * g.ow
	bad, err := b.withErrorWord(func(word uintptr) error {
		a := new(Args)
		a.Ptr(b.ptr(dx)).Ptr(b.ptr(dy)).Ptr(b.ptr(indices)).I64(int64(total)).I64(int64(g.h * g.w)).I64(int64(g.oh * g.ow)).Ptr(word)
		return b.launchN("pool", "pool_max_back_"+t, total, a)
	})
	if err != nil {
		return err
	}
	if bad != noError {
		return fmt.Errorf("cuda: pool2d_backward: index at output element %d outside its %d×%d plane", bad, g.h, g.w)
	}
	return nil
}
