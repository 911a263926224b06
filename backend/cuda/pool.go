package cuda

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// poolGeom is a validated 2-D pooling (or convolution window) geometry, in
// the order the kernels read it (PoolGeom in pool.cu).
type poolGeom struct{ backend.Pool2dGeometry }

// pack adds the geometry as two Dims.
func (g poolGeom) pack(a *Args) {
	a.I64s([]int64{int64(g.H), int64(g.W), int64(g.OH), int64(g.OW), int64(g.KH), int64(g.KW), int64(g.SH), int64(g.SW)}, maxDims)
	a.I64s([]int64{int64(g.PH), int64(g.PW), int64(g.DH), int64(g.DW)}, maxDims)
}

func (b *Backend) poolGeometry(kernel string, op backend.PoolOp, x, y, indices backend.View, p backend.PoolParams) (poolGeom, error) {
	g, err := backend.CheckPool2d(op, x, y, indices, p)
	if err != nil {
		return poolGeom{}, fmt.Errorf("cuda: %s: %w", kernel, err)
	}
	for i, v := range []backend.View{x, y, indices} {
		if v.IsZero() {
			continue
		}
		if err := b.checkView(kernel, fmt.Sprintf("operand %d", i), v); err != nil {
			return poolGeom{}, err
		}
		if !v.IsContiguous() {
			return poolGeom{}, fmt.Errorf("cuda: %s: x%v, y%v, %+v: operand %d is not contiguous", kernel, x.Shape, y.Shape, p, i)
		}
	}
	return poolGeom{g}, nil
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
	total := g.Planes * g.OH * g.OW
	t := typeTag(x.DType)
	a := new(Args)
	if op == backend.MaxPool {
		a.Ptr(b.ptr(dst)).Ptr(b.ptr(indices)).Ptr(b.ptr(x)).I64(int64(total))
		g.pack(a)
		return b.launchN("pool", "pool_max_"+t, total, a)
	}
	a.Ptr(b.ptr(dst)).Ptr(b.ptr(x)).I64(int64(total))
	g.pack(a)
	a.Int(boolInt(g.IncludePad))
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
		total := g.Planes * g.H * g.W
		a := new(Args)
		a.Ptr(b.ptr(dx)).Ptr(b.ptr(dy)).I64(int64(total))
		g.pack(a)
		a.Int(boolInt(g.IncludePad))
		return b.launchN("pool", "pool_avg_back_"+t, total, a)
	}
	if err := b.eng.zero(b.ptr(dx), dx.NumElements()*dx.DType.Size()); err != nil {
		return err
	}
	total := g.Planes * g.OH * g.OW
	bad, err := b.withErrorWord(func(word uintptr) error {
		a := new(Args)
		a.Ptr(b.ptr(dx)).Ptr(b.ptr(dy)).Ptr(b.ptr(indices)).I64(int64(total)).I64(int64(g.H * g.W)).I64(int64(g.OH * g.OW)).Ptr(word)
		return b.launchN("pool", "pool_max_back_"+t, total, a)
	})
	if err != nil {
		return err
	}
	if bad != noError {
		return fmt.Errorf("cuda: pool2d_backward: index at output element %d outside its %d×%d plane", bad, g.H, g.W)
	}
	return nil
}
