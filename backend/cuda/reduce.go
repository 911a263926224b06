package cuda

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

// reduceStateSize is sizeof(St) in reduce.cu: two doubles and a long long.
const reduceStateSize = 24

// Reduce implements backend.Backend for Float32 and Float64 x; ArgMax and
// ArgMin write Int64. States accumulate in float64 (sums compensated), so
// results agree with the CPU's to the last bits of float32; Max, Min and the
// arg-reductions propagate NaN with the first NaN's position, as PyTorch.
func (b *Backend) Reduce(op backend.ReduceOp, dst, x backend.View, axes []int, p backend.ReduceParams) error {
	if err := b.checkView("reduce", "dst", dst); err != nil {
		return err
	}
	if err := b.checkView("reduce", "x", x); err != nil {
		return err
	}
	if op > backend.Var {
		return fmt.Errorf("cuda: reduce: unknown op %d", op)
	}
	if err := floatType("reduce", x.DType); err != nil {
		return err
	}
	want := x.DType
	arg := op == backend.ArgMax || op == backend.ArgMin
	if arg {
		want = backend.Int64
		if len(axes) != 1 {
			return fmt.Errorf("cuda: reduce: arg-reduction over %d axes %v, want one", len(axes), axes)
		}
	}
	if dst.DType != want {
		return fmt.Errorf("cuda: reduce: dst dtype %v, want %v", dst.DType, want)
	}
	for i, a := range axes {
		if a < 0 || a >= len(x.Shape) || (i > 0 && a <= axes[i-1]) {
			return fmt.Errorf("cuda: reduce: axes %v for shape %v must be sorted, distinct and in range", axes, x.Shape)
		}
	}
	var kept, red backend.Shape
	var keptSt, redSt []int
	next := 0
	for d := range x.Shape {
		if next < len(axes) && axes[next] == d {
			red = append(red, x.Shape[d])
			redSt = append(redSt, x.Strides[d])
			next++
		} else {
			kept = append(kept, x.Shape[d])
			keptSt = append(keptSt, x.Strides[d])
		}
	}
	if kept == nil {
		kept = backend.Shape{}
	}
	if !dst.Shape.Equal(kept) || !dst.IsContiguous() {
		return fmt.Errorf("cuda: reduce: dst shape %v, strides %v; want contiguous %v for x %v over axes %v", dst.Shape, dst.Strides, kept, x.Shape, axes)
	}
	nout, nred := kept.NumElements(), red.NumElements()
	if nout == 0 {
		return nil
	}
	if nred == 0 {
		switch op {
		case backend.Sum:
			return b.Fill(dst, 0)
		case backend.Mean, backend.Var:
			return b.Fill(dst, math.NaN())
		}
		return fmt.Errorf("cuda: reduce: op %d over empty axes %v of shape %v", op, axes, x.Shape)
	}
	kl, err := coalesce(kept, backend.View{Strides: keptSt})
	if err != nil {
		return err
	}
	rl, err := coalesce(red, backend.View{Strides: redSt})
	if err != nil {
		return err
	}
	var out, outIdx uintptr
	if arg {
		outIdx = b.ptr(dst)
	} else {
		out = b.ptr(dst)
	}
	t := typeTag(x.DType)
	corr := int64(p.Correction)
	layouts := func(a *Args) {
		a.Int(len(kl.shape)).I64s(kl.shape, maxDims).I64s(kl.strides[0], maxDims)
		a.Int(len(rl.shape)).I64s(rl.shape, maxDims).I64s(rl.strides[0], maxDims)
	}
	if nred <= 64 {
		a := new(Args)
		a.Ptr(out).Ptr(outIdx).Ptr(b.ptr(x)).Int(int(op)).I64(int64(nout)).I64(int64(nred)).I64(corr)
		layouts(a)
		return b.launchN("reduce", "reduce_thread_"+t, nout, a)
	}
	// Few outputs: split each into groups, so that the whole device works.
	groups := 1
	if nout < b.maxGrid {
		groups = min((nred+8191)/8192, (2*b.maxGrid+nout-1)/nout)
		groups = max(groups, 1)
	}
	chunk := (nred + groups - 1) / groups
	groups = (nred + chunk - 1) / chunk
	var part uintptr
	if groups > 1 {
		buf, release, err := b.scratch(nout * groups * reduceStateSize)
		if err != nil {
			return err
		}
		defer release()
		part = buf.blk.ptr
	}
	threads := min(rowThreads(chunk), blockThreads)
	a := new(Args)
	a.Ptr(out).Ptr(outIdx).Ptr(part).Ptr(b.ptr(x)).Int(int(op)).I64(int64(nred)).I64(int64(chunk)).I64(int64(groups)).I64(corr)
	layouts(a)
	if err := b.eng.launch("reduce", "reduce_block_"+t, nout*groups, threads, 0, a); err != nil {
		return err
	}
	if groups == 1 {
		return nil
	}
	f := new(Args)
	f.Ptr(out).Ptr(outIdx).Ptr(part).Int(int(op)).I64(int64(nout)).I64(int64(nred)).I64(int64(groups)).I64(corr)
	return b.launchN("reduce", "reduce_final_"+t, nout, f)
}
