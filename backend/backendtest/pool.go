package backendtest

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

func init() { register("Pool", checkPool) }

// poolSize is PyTorch's pooling_output_shape, written out here rather than
// taken from PoolParams.OutputSize: with ceil mode the last window must
// start inside the input or its left padding.
func poolSize(in, k, s, pad, d int, ceil bool) int {
	eff := d*(k-1) + 1
	var out int
	if ceil {
		out = int(math.Ceil(float64(in+2*pad-eff)/float64(s))) + 1
		if (out-1)*s >= in+pad {
			out--
		}
	} else {
		out = int(math.Floor(float64(in+2*pad-eff)/float64(s))) + 1
	}
	return out
}

// refMaxPool returns the max pooling of one h×w plane and the flat index of
// each maximum. A NaN wins (the last one seen in row-major order); otherwise
// the first of equal maxima. A window's index defaults to its first
// position inside the input.
func refMaxPool(x []float64, h, w, oh, ow int, p backend.PoolParams) (y, idx []float64) {
	for i := 0; i < oh; i++ {
		for j := 0; j < ow; j++ {
			best, at := math.Inf(-1), -1
			for a := 0; a < p.KernelH; a++ {
				ih := i*p.StrideH - p.PadH + a*p.DilationH
				if ih < 0 || ih >= h {
					continue
				}
				for b := 0; b < p.KernelW; b++ {
					iw := j*p.StrideW - p.PadW + b*p.DilationW
					if iw < 0 || iw >= w {
						continue
					}
					v := x[ih*w+iw]
					if at < 0 || v > best || math.IsNaN(v) {
						best, at = v, ih*w+iw
					}
				}
			}
			y = append(y, best)
			idx = append(idx, float64(at))
		}
	}
	return y, idx
}

// avgTaps calls fn(xi, yi, count) for every input position xi inside the
// window of output yi, where count is the window's divisor: its positions
// inside the padded input (and, in ceil mode, not past it) when
// CountIncludePad, else its positions inside the input.
func avgTaps(h, w, oh, ow int, p backend.PoolParams, fn func(xi, yi int, count float64)) {
	for i := 0; i < oh; i++ {
		for j := 0; j < ow; j++ {
			var in, padded int
			var pos []int
			for a := 0; a < p.KernelH; a++ {
				ih := i*p.StrideH - p.PadH + a
				for b := 0; b < p.KernelW; b++ {
					iw := j*p.StrideW - p.PadW + b
					if ih < h+p.PadH && iw < w+p.PadW {
						padded++
					}
					if ih >= 0 && ih < h && iw >= 0 && iw < w {
						in++
						pos = append(pos, ih*w+iw)
					}
				}
			}
			count := float64(in)
			if p.CountIncludePad {
				count = float64(padded)
			}
			for _, xi := range pos {
				fn(xi, i*ow+j, count)
			}
		}
	}
}

func checkPool(e *Env) {
	type tc struct {
		n, c, h, w int
		p          backend.PoolParams
		levels     int // > 0: values drawn from this many levels, for ties
	}
	pp := func(k, s, pad, d int, ceil, inc bool) backend.PoolParams {
		return backend.PoolParams{KernelH: k, KernelW: k, StrideH: s, StrideW: s, PadH: pad, PadW: pad,
			DilationH: d, DilationW: d, CeilMode: ceil, CountIncludePad: inc}
	}
	cases := []tc{
		{n: 2, c: 3, h: 4, w: 4, p: pp(2, 2, 0, 1, false, true)},
		{n: 1, c: 2, h: 7, w: 7, p: pp(3, 2, 1, 1, false, true)},
		{n: 1, c: 2, h: 7, w: 7, p: pp(3, 2, 1, 1, false, false)},
		{n: 1, c: 2, h: 5, w: 5, p: pp(2, 2, 0, 1, true, true)},
		{n: 1, c: 2, h: 5, w: 6, p: pp(2, 2, 1, 1, true, true)},
		{n: 1, c: 2, h: 5, w: 6, p: pp(2, 2, 1, 1, true, false)},
		{n: 2, c: 1, h: 8, w: 9, p: pp(3, 3, 1, 1, true, true)},
		{n: 1, c: 1, h: 1, w: 1, p: pp(1, 1, 0, 1, false, true)},
		{n: 0, c: 3, h: 4, w: 4, p: pp(2, 2, 0, 1, false, true)},
		{n: 2, c: 3, h: 6, w: 5, p: pp(3, 1, 1, 1, false, false), levels: 3},
		{n: 4, c: 16, h: 40, w: 41, p: pp(3, 2, 1, 1, true, false)},
		{n: 1, c: 2, h: 9, w: 11, p: backend.PoolParams{KernelH: 2, KernelW: 3, StrideH: 1, StrideW: 2, PadH: 1, PadW: 0,
			DilationH: 1, DilationW: 1, CeilMode: true}},
	}
	dilated := []tc{
		{n: 1, c: 2, h: 9, w: 9, p: pp(3, 2, 1, 2, false, false)},
		{n: 1, c: 2, h: 10, w: 8, p: pp(2, 3, 1, 3, true, false)},
	}
	for _, dt := range FloatTypes {
		for _, op := range []backend.PoolOp{backend.MaxPool, backend.AvgPool} {
			list := cases
			if op == backend.MaxPool {
				list = append(append([]tc{}, cases...), dilated...)
			}
			for _, c := range list {
				p := c.p
				name := fmt.Sprintf("%v/op%d/x[%d %d %d %d]/%+v", dt, op, c.n, c.c, c.h, c.w, p)
				oh := poolSize(c.h, p.KernelH, p.StrideH, p.PadH, p.DilationH, p.CeilMode)
				ow := poolSize(c.w, p.KernelW, p.StrideW, p.PadW, p.DilationW, p.CeilMode)
				xs, ys := backend.Shape{c.n, c.c, c.h, c.w}, backend.Shape{c.n, c.c, oh, ow}
				x, xv := e.Random(dt, xs, false, -1, 1)
				if c.levels > 0 {
					for i := range xv {
						xv[i] = float64(e.Rand.IntN(c.levels))
					}
					e.Set(x, xv)
				}
				planes, hw, ohw := c.n*c.c, c.h*c.w, oh*ow
				y := e.Alloc(dt, ys)
				dy, dyv := e.Random(dt, ys, false, -1, 1)
				dx := e.Alloc(dt, xs)
				wantY := make([]float64, 0, ys.NumElements())
				wantDX := make([]float64, xs.NumElements())
				if op == backend.MaxPool {
					for pl := 0; pl < planes; pl++ {
						py, _ := refMaxPool(xv[pl*hw:(pl+1)*hw], c.h, c.w, oh, ow, p)
						wantY = append(wantY, py...)
					}
					idx := e.Alloc(backend.Int64, ys)
					if err := e.B.Pool2d(op, y, idx, x, p); err != nil {
						e.T.Errorf("%s: Pool2d: %v", name, err)
						continue
					}
					e.Close(name+": Pool2d", e.Get(y), wantY, 0, 0)
					// The indices must name a maximum; with ties, the first.
					var wantIdx []float64
					for pl := 0; pl < planes; pl++ {
						_, pi := refMaxPool(xv[pl*hw:(pl+1)*hw], c.h, c.w, oh, ow, p)
						wantIdx = append(wantIdx, pi...)
					}
					e.Close(name+": Pool2d indices", e.Get(idx), wantIdx, 0, 0)
					// The backward pass is checked on arbitrary indices,
					// repeats included, independently of the forward pass.
					rnd := make([]float64, ys.NumElements())
					for i := range rnd {
						rnd[i] = float64(e.Rand.IntN(hw))
						pl := i / max(ohw, 1)
						wantDX[pl*hw+int(rnd[i])] += dyv[i]
					}
					e.Set(idx, rnd)
					if err := e.B.Pool2dBackward(op, dx, dy, idx, p); err != nil {
						e.T.Errorf("%s: Pool2dBackward: %v", name, err)
						continue
					}
					e.Close(name+": Pool2dBackward", e.Get(dx), wantDX, Tol(dt)*4, Tol(dt)*4)
					continue
				}
				wantY = make([]float64, ys.NumElements())
				for pl := 0; pl < planes; pl++ {
					avgTaps(c.h, c.w, oh, ow, p, func(xi, yi int, count float64) {
						wantY[pl*ohw+yi] += xv[pl*hw+xi] / count
						wantDX[pl*hw+xi] += dyv[pl*ohw+yi] / count
					})
				}
				if err := e.B.Pool2d(op, y, backend.View{}, x, p); err != nil {
					e.T.Errorf("%s: Pool2d: %v", name, err)
					continue
				}
				e.Close(name+": Pool2d", e.Get(y), wantY, Tol(dt)*4, Tol(dt)*4)
				if err := e.B.Pool2dBackward(op, dx, dy, backend.View{}, p); err != nil {
					e.T.Errorf("%s: Pool2dBackward: %v", name, err)
					continue
				}
				e.Close(name+": Pool2dBackward", e.Get(dx), wantDX, Tol(dt)*4, Tol(dt)*4)
			}
		}
	}
	checkMaxPoolNaN(e)
	checkPoolErrors(e)
}

// checkMaxPoolNaN checks that NaN propagates through max pooling and that
// its index is reported.
func checkMaxPoolNaN(e *Env) {
	for _, dt := range FloatTypes {
		p := backend.PoolParams{KernelH: 2, KernelW: 2, StrideH: 2, StrideW: 2, DilationH: 1, DilationW: 1}
		xv := []float64{
			1, math.NaN(), 5, 6,
			3, 4, math.Inf(-1), math.Inf(-1),
			math.NaN(), 2, 0, 0,
			9, math.NaN(), 0, -1,
		}
		x := e.Alloc(dt, backend.Shape{1, 1, 4, 4})
		e.Set(x, xv)
		y := e.Alloc(dt, backend.Shape{1, 1, 2, 2})
		idx := e.Alloc(backend.Int64, backend.Shape{1, 1, 2, 2})
		if err := e.B.Pool2d(backend.MaxPool, y, idx, x, p); err != nil {
			e.T.Errorf("%v: max pool with NaN: %v", dt, err)
			continue
		}
		wantY, wantIdx := refMaxPool(xv, 4, 4, 2, 2, p)
		e.Close(fmt.Sprintf("%v: max pool with NaN", dt), e.Get(y), wantY, 0, 0)
		e.Close(fmt.Sprintf("%v: max pool with NaN, indices", dt), e.Get(idx), wantIdx, 0, 0)
	}
}

func checkPoolErrors(e *Env) {
	dt := backend.Float32
	f := func(s ...int) backend.View { return e.Alloc(dt, s) }
	ok := backend.PoolParams{KernelH: 2, KernelW: 2, StrideH: 2, StrideW: 2, DilationH: 1, DilationW: 1}
	bigPad := ok
	bigPad.PadH = 2
	noStride := ok
	noStride.StrideW = 0
	dilAvg := ok
	dilAvg.DilationH = 2
	big := ok
	big.KernelH, big.KernelW, big.StrideH, big.StrideW = 5, 5, 5, 5
	idx := e.Alloc(backend.Int64, backend.Shape{1, 1, 2, 2})
	idx32 := e.Alloc(backend.Int32, backend.Shape{1, 1, 2, 2})
	cases := []struct {
		name string
		op   backend.PoolOp
		y, x backend.View
		idx  backend.View
		p    backend.PoolParams
	}{
		{"wrong output shape", backend.MaxPool, f(1, 1, 3, 2), f(1, 1, 4, 4), e.Alloc(backend.Int64, backend.Shape{1, 1, 3, 2}), ok},
		{"padding over half the kernel", backend.AvgPool, f(1, 1, 4, 4), f(1, 1, 4, 4), backend.View{}, bigPad},
		{"zero stride", backend.AvgPool, f(1, 1, 2, 2), f(1, 1, 4, 4), backend.View{}, noStride},
		{"window larger than input", backend.AvgPool, f(1, 1, 1, 1), f(1, 1, 4, 4), backend.View{}, big},
		{"dilated average", backend.AvgPool, f(1, 1, 1, 2), f(1, 1, 4, 4), backend.View{}, dilAvg},
		{"max without indices", backend.MaxPool, f(1, 1, 2, 2), f(1, 1, 4, 4), backend.View{}, ok},
		{"int32 indices", backend.MaxPool, f(1, 1, 2, 2), f(1, 1, 4, 4), idx32, ok},
		{"rank 3", backend.AvgPool, f(1, 2, 2), f(1, 4, 4), backend.View{}, ok},
		{"dtype mismatch", backend.MaxPool, e.Alloc(backend.Float64, backend.Shape{1, 1, 2, 2}), f(1, 1, 4, 4), idx, ok},
	}
	for _, c := range cases {
		if err := e.B.Pool2d(c.op, c.y, c.idx, c.x, c.p); err == nil {
			e.T.Errorf("Pool2d with %s: no error", c.name)
		}
		if err := e.B.Pool2dBackward(c.op, c.x, c.y, c.idx, c.p); err == nil {
			e.T.Errorf("Pool2dBackward with %s: no error", c.name)
		}
	}
	e.Set(idx, []float64{0, 3, 16, 1})
	if err := e.B.Pool2dBackward(backend.MaxPool, f(1, 1, 4, 4), f(1, 1, 2, 2), idx, ok); err == nil {
		e.T.Errorf("Pool2dBackward with an index outside the plane: no error")
	}
}
