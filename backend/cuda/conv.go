package cuda

import (
	"fmt"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// convGeom is a validated convolution: x [n, c, h, w], w [o, c/g, kh, kw],
// y [n, o, oh, ow].
type convGeom struct {
	n, c, h, w, o  int
	kh, kw, oh, ow int
	groups, cg, og int
	p              backend.ConvParams
}

func (g convGeom) window() poolGeom {
	return poolGeom{backend.Pool2dGeometry{H: g.h, W: g.w, OH: g.oh, OW: g.ow, KH: g.kh, KW: g.kw, SH: g.p.StrideH, SW: g.p.StrideW,
		PH: g.p.PadH, PW: g.p.PadW, DH: g.p.DilationH, DW: g.p.DilationW}}
}

func (b *Backend) convGeometry(kernel string, x, w, y backend.View, p backend.ConvParams) (convGeom, error) {
	g, err := backend.CheckConv2d(x, w, y, p)
	if err != nil {
		return convGeom{}, fmt.Errorf("cuda: %s: %w", kernel, err)
	}
	for i, v := range []backend.View{x, w, y} {
		if err := b.checkView(kernel, fmt.Sprintf("operand %d", i), v); err != nil {
			return convGeom{}, err
		}
		if !v.IsContiguous() {
			return convGeom{}, fmt.Errorf("cuda: %s: x%v, w%v, y%v, %+v: operand %d is not contiguous", kernel, x.Shape, w.Shape, y.Shape, p, i)
		}
	}
	return convGeom{n: g.N, c: g.C, h: g.H, w: g.W, o: g.O, kh: g.KH, kw: g.KW, oh: g.OH, ow: g.OW,
		groups: g.Groups, cg: g.CG, og: g.OG, p: p}, nil
}

func (b *Backend) useDNN() bool { return b.dnn != nil && !b.Options().NoCUDNN }

// Conv2d implements backend.Backend: cuDNN when present, otherwise im2col
// and a matrix product per group.
func (b *Backend) Conv2d(dst, x, w backend.View, p backend.ConvParams) error {
	g, err := b.convGeometry("conv2d", x, w, dst, p)
	if err != nil {
		return err
	}
	if g.n == 0 || g.o == 0 {
		return nil
	}
	if b.useDNN() {
		return b.convDNN(convForward, g, x, w, dst)
	}
	return b.convFallback(convForward, g, x, w, dst)
}

// Conv2dBackwardData implements backend.Backend.
func (b *Backend) Conv2dBackwardData(dx, dy, w backend.View, p backend.ConvParams) error {
	g, err := b.convGeometry("conv2d backward data", dx, w, dy, p)
	if err != nil {
		return err
	}
	if g.n == 0 || g.c == 0 {
		return nil
	}
	if g.o == 0 {
		return b.Fill(dx, 0)
	}
	if b.useDNN() {
		return b.convDNN(convBackwardData, g, dx, w, dy)
	}
	return b.convFallback(convBackwardData, g, dx, w, dy)
}

// Conv2dBackwardWeight implements backend.Backend.
func (b *Backend) Conv2dBackwardWeight(dw, x, dy backend.View, p backend.ConvParams) error {
	g, err := b.convGeometry("conv2d backward weight", x, dw, dy, p)
	if err != nil {
		return err
	}
	if g.o == 0 || g.c == 0 {
		return nil
	}
	if g.n == 0 {
		return b.Fill(dw, 0)
	}
	if b.useDNN() {
		return b.convDNN(convBackwardFilter, g, x, dw, dy)
	}
	return b.convFallback(convBackwardFilter, g, x, dw, dy)
}

// convDNN runs one direction on cuDNN; x, w, y are the (input, filter,
// output) operands whatever the direction writes. With Options.Autocast the
// float32 operands are rounded to the half type first and the result
// converted back.
func (b *Backend) convDNN(dir convDir, g convGeom, x, w, y backend.View) error {
	dt := x.DType
	opts := b.Options()
	if opts.Autocast != backend.Invalid && dt == backend.Float32 {
		var releases []func()
		defer func() {
			for _, f := range releases {
				f()
			}
		}()
		half := func(v backend.View, load bool) (backend.View, error) {
			tmp, release, err := b.scratchView(opts.Autocast, v.Shape)
			if err != nil {
				return tmp, err
			}
			releases = append(releases, release)
			if load {
				return tmp, b.Copy(tmp, v)
			}
			return tmp, nil
		}
		hx, err := half(x, dir != convBackwardData)
		if err != nil {
			return err
		}
		hw, err := half(w, dir != convBackwardFilter)
		if err != nil {
			return err
		}
		hy, err := half(y, dir != convForward)
		if err != nil {
			return err
		}
		if err := b.convDNNRun(dir, g, opts.Autocast, hx, hw, hy, opts.TF32); err != nil {
			return err
		}
		switch dir {
		case convForward:
			return b.Copy(y, hy)
		case convBackwardData:
			return b.Copy(x, hx)
		default:
			return b.Copy(w, hw)
		}
	}
	return b.convDNNRun(dir, g, dt, x, w, y, opts.TF32)
}

func (b *Backend) convDNNRun(dir convDir, g convGeom, dt backend.DType, x, w, y backend.View, tf32 bool) error {
	c := b.dnn
	leave, err := b.eng.enter()
	if err != nil {
		return err
	}
	defer leave()
	d, err := c.descriptors(dt, x.Shape, w.Shape, y.Shape, g.p, tf32)
	if err != nil {
		return err
	}
	defer c.destroy(d)
	key := convKey{dir: dir, dtype: dt, tensorOps: tf32, n: g.n, c: g.c, h: g.h, w: g.w, o: g.o, kh: g.kh, kw: g.kw, p: g.p}
	xp, wp, yp := b.ptr(x), b.ptr(w), b.ptr(y)
	c.mu.Lock()
	algo, ok := c.algos[key]
	c.mu.Unlock()
	if !ok {
		ws, release, err := b.scratch(cudnnWorkspaceLimit)
		if err != nil {
			// A smaller search space is better than none.
			ws, release, err = b.scratch(64 << 20)
			if err != nil {
				return err
			}
		}
		perf := make([]byte, cudnnAlgoCandidates*cudnnPerfSize)
		var got int32
		var st int32
		call := ""
		switch dir {
		case convForward:
			call = "cudnnFindConvolutionForwardAlgorithmEx"
			st = c.cudnnFindFwdAlgoEx(c.handle, d.x, xp, d.w, wp, d.conv, d.y, yp, cudnnAlgoCandidates, &got,
				unsafe.Pointer(&perf[0]), ws.Ptr(), uint64(ws.Size()))
		case convBackwardData:
			call = "cudnnFindConvolutionBackwardDataAlgorithmEx"
			st = c.cudnnFindBwdDataAlgoEx(c.handle, d.w, wp, d.y, yp, d.conv, d.x, xp, cudnnAlgoCandidates, &got,
				unsafe.Pointer(&perf[0]), ws.Ptr(), uint64(ws.Size()))
		default:
			call = "cudnnFindConvolutionBackwardFilterAlgorithmEx"
			st = c.cudnnFindBwdFilterAlgoEx(c.handle, d.x, xp, d.y, yp, d.conv, d.w, wp, cudnnAlgoCandidates, &got,
				unsafe.Pointer(&perf[0]), ws.Ptr(), uint64(ws.Size()))
		}
		release()
		if err := c.check(call, st); err != nil {
			return err
		}
		if algo, ok = pickAlgo(perf, int(got)); !ok {
			return fmt.Errorf("cuda: %s: no algorithm for x%v w%v y%v", call, x.Shape, w.Shape, y.Shape)
		}
		c.mu.Lock()
		c.algos[key] = algo
		c.mu.Unlock()
	}
	var wsPtr uintptr
	if algo.workspace > 0 {
		ws, release, err := b.scratch(int(algo.workspace))
		if err != nil {
			return err
		}
		defer release()
		wsPtr = ws.Ptr()
	}
	alpha, beta := cudnnScalars(dt, 1, 0)
	switch dir {
	case convForward:
		return c.check("cudnnConvolutionForward", c.cudnnConvolutionForward(c.handle, alpha, d.x, xp, d.w, wp, d.conv,
			algo.algo, wsPtr, algo.workspace, beta, d.y, yp))
	case convBackwardData:
		return c.check("cudnnConvolutionBackwardData", c.cudnnConvolutionBackwardData(c.handle, alpha, d.w, wp, d.y, yp,
			d.conv, algo.algo, wsPtr, algo.workspace, beta, d.x, xp))
	default:
		return c.check("cudnnConvolutionBackwardFilter", c.cudnnConvolutionBackwardFilter(c.handle, alpha, d.x, xp, d.y, yp,
			d.conv, algo.algo, wsPtr, algo.workspace, beta, d.w, wp))
	}
}

// convColumnBytes bounds the im2col buffer of the fallback.
const convColumnBytes = 64 << 20

// convFallback computes a convolution direction with im2col/col2im and the
// backend's matrix products, a chunk of images at a time. x, w, y are the
// (input, filter, output) operands.
func (b *Backend) convFallback(dir convDir, g convGeom, x, w, y backend.View) error {
	dt := x.DType
	es := dt.Size()
	kk := g.kh * g.kw
	l := g.oh * g.ow
	rows := g.c * kk // rows of one image's columns, all groups
	perImage := rows * l * es
	nb := max(1, min(g.n, convColumnBytes/max(perImage, 1)))
	col, release, err := b.scratch(nb * perImage)
	if err != nil {
		return err
	}
	defer release()
	win := g.window()
	t := typeTag(dt)
	xp, wp, yp := b.ptr(x), b.ptr(w), b.ptr(y)
	for n0 := 0; n0 < g.n; n0 += nb {
		cnt := min(nb, g.n-n0)
		xAt := xp + uintptr(n0*g.c*g.h*g.w*es)
		yAt := yp + uintptr(n0*g.o*l*es)
		if dir != convBackwardData {
			a := new(Args)
			a.Ptr(col.Ptr()).Ptr(xAt).I64(int64(cnt)).I64(int64(g.c))
			win.pack(a)
			if err := b.launchN("pool", "im2col_"+t, cnt*rows*l, a); err != nil {
				return err
			}
		}
		for gi := 0; gi < g.groups; gi++ {
			wg := mat{ptr: wp + uintptr(gi*g.og*g.cg*kk*es), dt: dt, rs: g.cg * kk, cs: 1}
			colg := mat{ptr: col.Ptr() + uintptr(gi*g.cg*kk*l*es), dt: dt, rs: l, cs: 1, bs: rows * l}
			yg := mat{ptr: yAt + uintptr(gi*g.og*l*es), dt: dt, rs: l, cs: 1, bs: g.o * l}
			switch dir {
			case convForward: // y_g = w_g · col_g, per image
				if err := b.gemm(false, false, g.og, l, g.cg*kk, 1, wg, colg, 0, yg, cnt); err != nil {
					return err
				}
			case convBackwardData: // col_g = w_gᵀ · dy_g, per image
				if err := b.gemm(true, false, g.cg*kk, l, g.og, 1, wg, yg, 0, colg, cnt); err != nil {
					return err
				}
			default: // dw_g += dy_g · col_gᵀ, image after image
				for i := 0; i < cnt; i++ {
					beta := 1.0
					if n0 == 0 && i == 0 {
						beta = 0
					}
					yi, ci := yg, colg
					yi.ptr += uintptr(i * g.o * l * es)
					ci.ptr += uintptr(i * rows * l * es)
					if err := b.gemm(false, true, g.og, g.cg*kk, l, 1, yi, ci, beta, wg, 1); err != nil {
						return err
					}
				}
			}
		}
		if dir == convBackwardData {
			a := new(Args)
			a.Ptr(xAt).Ptr(col.Ptr()).I64(int64(cnt)).I64(int64(g.c))
			win.pack(a)
			if err := b.launchN("pool", "col2im_"+t, cnt*g.c*g.h*g.w, a); err != nil {
				return err
			}
		}
	}
	return nil
}
