package cpu

import (
	"fmt"
	"runtime"

	"github.com/flockml/flock/backend"
)

// The convolutions lower to matrix products (Chellapilla et al., "High
// Performance Convolutional Neural Networks for Document Processing", 2006).
// For group g, with P = OH·OW output positions per sample and R =
// (C/groups)·KH·KW window taps, im2col gathers the columns
//
//	col[(c, kh, kw), (n, oh, ow)] = x[n, g·C/groups + c, oh·sh − ph + kh·dh, ow·sw − pw + kw·dw]
//
// (zero outside the input), one column per output position of every sample,
// so that
//
//	forward:          y[:, g]  = w[g] · col                (O/groups × N·P)
//	backward, data:   dx[:, g] = col2im(w[g]ᵀ · dy[:, g])  (col2im adds each tap back)
//	backward, weight: dw[g]    = dy[:, g] · colᵀ
//
// The columns are cut into blocks of about the same width (convPlan): a
// block is a run of whole output rows of one sample when a plane has many
// positions, or several whole samples when it has few, so that every product
// is wide enough for the matrix kernels and its im2col scratch stays in the
// L2 cache. A block's products read and write the samples' planes in place
// when the block lies in one sample; otherwise they go through scratch in
// the block's layout (O/groups rows of the block's columns). A 1×1 kernel
// with stride 1 and no padding uses x itself as col where it can. Blocks are
// the tasks of the goroutines, with scratch from a pool, so a training step
// at steady state allocates no new scratch.
//
// With unit strides and dilations and enough channels, the data gradient
// runs instead as the forward pass of the transposed convolution (dy
// convolved with the flipped kernel), which needs no col2im.
//
// On the AVX-512 path, "same" convolutions with unit stride and at least 16
// channels per group run their forward pass (and so the data gradient)
// without im2col, by the direct kernel of conv_direct.go, on the plane
// sizes where it measures faster; with one group, padding and small planes
// they run the batch-minor lowering of conv_batchminor.go instead (and so
// does the weight gradient on the smallest planes), which skips the window
// taps outside the plane.
//
// im2col and col2im move each tap's rows of a block with the row routines
// (conv_rows.go): masked vector copies on the AVX-512 path for column
// stride 1 or 2, Go loops otherwise.

// convShape is a validated convolution.
type convShape struct {
	n, c, h, w     int
	o, kh, kw      int
	oh, ow         int
	sh, sw         int
	ph, pw         int
	dh, dw         int
	groups, cg, og int
}

// taps is R, the rows of a group's im2col matrix.
func (s *convShape) taps() int { return s.cg * s.kh * s.kw }

// positions is P, the output positions of one plane.
func (s *convShape) positions() int { return s.oh * s.ow }

// pointwise reports whether im2col is the identity (1×1 kernel, stride 1,
// no padding), so that x itself serves as the column matrix.
func (s *convShape) pointwise() bool {
	return s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0
}

// convPlan is how a convolution's columns are cut into blocks.
type convPlan struct {
	rows   int // output rows per block when blocks lie within a sample
	nb     int // samples per block; when 1, each sample has perSample blocks
	blocks int // blocks in all
	width  int // most columns of a block
}

// convBlock is one block of columns: positions [p0, p0+np) of each of the
// ns samples from n0 (ns > 1 only with whole planes, p0 = 0 and np = P).
type convBlock struct{ n0, ns, p0, np int }

// plan cuts the columns into blocks of about t columns, t between 64 and
// 256 such that the R×t im2col matrix takes at most 1 MiB.
func (s *convShape) plan() convPlan { return s.planAtLeast(0) }

// planAtLeast is plan with t at least least.
func (s *convShape) planAtLeast(least int) convPlan {
	P := s.positions()
	t := max(least, min(256, max(64, (1<<18)/max(1, s.taps()))))
	if P >= t || s.n == 1 {
		rows := min(s.oh, max(1, t/s.ow))
		per := (s.oh + rows - 1) / rows
		rows = (s.oh + per - 1) / per // the same number of blocks, evened out
		per = (s.oh + rows - 1) / rows
		return convPlan{rows: rows, nb: 1, blocks: s.n * per, width: rows * s.ow}
	}
	nb := max(1, min(s.n, (t+P/2)/P))
	return convPlan{rows: s.oh, nb: nb, blocks: (s.n + nb - 1) / nb, width: nb * P}
}

// block returns block u of the plan.
func (s *convShape) block(pl convPlan, u int) convBlock {
	if pl.nb > 1 {
		n0 := u * pl.nb
		return convBlock{n0: n0, ns: min(pl.nb, s.n-n0), p0: 0, np: s.positions()}
	}
	per := (s.oh + pl.rows - 1) / pl.rows
	p0 := u % per * pl.rows * s.ow
	return convBlock{n0: u / per, ns: 1, p0: p0, np: min(pl.rows*s.ow, s.positions()-p0)}
}

// cols is the number of columns of the block.
func (b convBlock) cols() int { return b.ns * b.np }

func convGeometry(kernel string, x, w, y backend.View, p backend.ConvParams) (convShape, error) {
	g, err := backend.CheckConv2d(x, w, y, p)
	if err != nil {
		return convShape{}, fmt.Errorf("cpu: %s: %w", kernel, err)
	}
	for i, v := range []backend.View{x, w, y} {
		if !v.IsContiguous() || !fits(v) {
			return convShape{}, fmt.Errorf("cpu: %s: x%v, w%v, y%v, %+v: operand %d is not a contiguous view inside its buffer",
				kernel, x.Shape, w.Shape, y.Shape, p, i)
		}
	}
	return convShape{
		n: g.N, c: g.C, h: g.H, w: g.W,
		o: g.O, kh: g.KH, kw: g.KW,
		oh: g.OH, ow: g.OW,
		sh: p.StrideH, sw: p.StrideW, ph: p.PadH, pw: p.PadW, dh: p.DilationH, dw: p.DilationW,
		groups: g.Groups, cg: g.CG, og: g.OG,
	}, nil
}

// Conv2d implements backend.Backend.
func (c *Backend) Conv2d(dst, x, w backend.View, p backend.ConvParams) error {
	s, err := convGeometry("conv2d", x, w, dst, p)
	if err != nil {
		return err
	}
	switch x.DType {
	case backend.Float32:
		if s.depthwise() {
			depthwiseForward(&s, x.Offset, w.Offset, dst.Offset, F32(x), F32(w), F32(dst))
		} else {
			convForward(&s, x.Offset, w.Offset, dst.Offset, F32(x), F32(w), F32(dst))
		}
	case backend.Float64:
		if s.depthwise() {
			depthwiseForward(&s, x.Offset, w.Offset, dst.Offset, F64(x), F64(w), F64(dst))
		} else {
			convForward(&s, x.Offset, w.Offset, dst.Offset, F64(x), F64(w), F64(dst))
		}
	}
	return nil
}

// Conv2dBackwardData implements backend.Backend.
func (c *Backend) Conv2dBackwardData(dx, dy, w backend.View, p backend.ConvParams) error {
	s, err := convGeometry("conv2d backward data", dx, w, dy, p)
	if err != nil {
		return err
	}
	switch dx.DType {
	case backend.Float32:
		if s.depthwise() {
			depthwiseBackwardData(&s, dx.Offset, w.Offset, dy.Offset, F32(dx), F32(w), F32(dy))
		} else {
			convBackwardDataVia(&s, dx.Offset, w.Offset, dy.Offset, F32(dx), F32(w), F32(dy))
		}
	case backend.Float64:
		if s.depthwise() {
			depthwiseBackwardData(&s, dx.Offset, w.Offset, dy.Offset, F64(dx), F64(w), F64(dy))
		} else {
			convBackwardDataVia(&s, dx.Offset, w.Offset, dy.Offset, F64(dx), F64(w), F64(dy))
		}
	}
	return nil
}

// Conv2dBackwardWeight implements backend.Backend.
func (c *Backend) Conv2dBackwardWeight(dw, x, dy backend.View, p backend.ConvParams) error {
	s, err := convGeometry("conv2d backward weight", x, dw, dy, p)
	if err != nil {
		return err
	}
	switch x.DType {
	case backend.Float32:
		if s.depthwise() {
			depthwiseBackwardWeight(&s, x.Offset, dw.Offset, dy.Offset, F32(x), F32(dw), F32(dy))
		} else {
			convBackwardWeight(&s, x.Offset, dw.Offset, dy.Offset, F32(x), F32(dw), F32(dy))
		}
	case backend.Float64:
		if s.depthwise() {
			depthwiseBackwardWeight(&s, x.Offset, dw.Offset, dy.Offset, F64(x), F64(dw), F64(dy))
		} else {
			convBackwardWeight(&s, x.Offset, dw.Offset, dy.Offset, F64(x), F64(dw), F64(dy))
		}
	}
	return nil
}

// lazyScratch is scratch taken from the pool on first use.
type lazyScratch[T float32 | float64] struct{ s *[]T }

// get returns n elements of the scratch, taking it on the first call.
func (l *lazyScratch[T]) get(n int) []T {
	if l.s == nil {
		l.s = getScratch[T](n)
	}
	return (*l.s)[:n]
}

// release returns the scratch, if any, to the pool.
func (l *lazyScratch[T]) release() {
	if l.s != nil {
		putScratch(l.s)
		l.s = nil
	}
}

// columns returns group g's column matrix of block b (R×b.cols(), row
// stride ld) and ld: x itself, where im2col is the identity and the block
// lies in one sample, else built by im2col in col.
func columns[T float32 | float64](s *convShape, pl convPlan, b convBlock, g int, x []T, col *lazyScratch[T]) ([]T, int) {
	HW := s.h * s.w
	if s.pointwise() && b.ns == 1 {
		return x[(b.n0*s.c+g*s.cg)*HW+b.p0:], s.positions()
	}
	ld := padLd(b.cols())
	c := col.get(s.taps() * padLd(pl.width))
	for i := range b.ns {
		im2col(s, s.cg, x[((b.n0+i)*s.c+g*s.cg)*HW:], b.p0, b.np, c[i*b.np:], ld)
	}
	return c, ld
}

// gradients returns group g's rows of dy for block b (O/groups × b.cols(),
// row stride ld) and ld: dy in place when the block lies in one sample,
// else gathered into buf.
func gradients[T float32 | float64](s *convShape, pl convPlan, b convBlock, g int, dy []T, buf *lazyScratch[T]) ([]T, int) {
	P := s.positions()
	if b.ns == 1 {
		return dy[(b.n0*s.o+g*s.og)*P+b.p0:], P
	}
	ld := padLd(b.cols())
	d := buf.get(s.og * padLd(pl.width))
	for i := range b.ns {
		src := dy[((b.n0+i)*s.o+g*s.og)*P:]
		for oc := range s.og {
			copy(d[oc*ld+i*P:oc*ld+(i+1)*P], src[oc*P:])
		}
	}
	return d, ld
}

// padLd returns the row stride for a scratch matrix of n columns: n, or a
// cache line more when n floats are a multiple of 1 KiB, where the rows a
// matrix kernel reads or writes together would share a few sets of the L1
// cache (and the kernels would copy the matrix rather than read it in
// place).
func padLd(n int) int {
	if n%256 == 0 {
		return n + 16
	}
	return n
}

// convForward computes y = conv(x, w); xo, wo and yo are the views' offsets.
func convForward[T float32 | float64](s *convShape, xo, wo, yo int, x, w, y []T) {
	if tapMajorForward(s, xo, wo, yo, x, w, y, false) {
		return
	}
	P, R := s.positions(), s.taps()
	pl := s.plan()
	flops := 2 * s.o * R * pl.width
	parallelShare(pl.blocks, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
		var col, out lazyScratch[T]
		defer col.release()
		defer out.release()
		for u := lo; u < hi; u++ {
			bk := s.block(pl, u)
			nc := bk.cols()
			for g := range s.groups {
				b, ldb := columns(s, pl, bk, g, x[xo:], &col)
				wg := w[wo+g*s.og*R:]
				if bk.ns == 1 {
					gemm(false, false, s.og, nc, R, 1, wg, R, b, ldb, 0, y[yo+(bk.n0*s.o+g*s.og)*P+bk.p0:], P)
					continue
				}
				ldo := padLd(nc)
				o := out.get(s.og * padLd(pl.width))
				gemm(false, false, s.og, nc, R, 1, wg, R, b, ldb, 0, o, ldo)
				for i := range bk.ns {
					yi := y[yo+((bk.n0+i)*s.o+g*s.og)*P:]
					for oc := range s.og {
						copy(yi[oc*P:(oc+1)*P], o[oc*ldo+i*P:])
					}
				}
			}
		}
	})
}

// tapMajorForward runs the forward pass of s by one of the lowerings that
// read the weights tap-major (directWeights; with flip, those of the
// convolution whose data gradient s computes), the batch-minor lowering or
// the direct kernel, where s suits one, and reports whether it did.
func tapMajorForward[T float32 | float64](s *convShape, xo, wo, yo int, x, w, y []T, flip bool) bool {
	xf, ok := any(x).([]float32)
	if !ok {
		return false
	}
	var run func(s *convShape, xo int, x, wp []float32, yo int, y []float32)
	switch {
	case s.batchMinor():
		run = convForwardBatchMinor
	case s.direct():
		run = convForwardDirect
	default:
		return false
	}
	wp := directWeights(s, wo, any(w).([]float32), flip)
	defer putScratch(wp)
	run(s, xo, xf, *wp, yo, any(y).([]float32))
	return true
}

// convMinTasks is the least number of tasks the data gradient is cut into
// where the channels allow.
const convMinTasks = 64

// convBackwardData computes dx from dy and w. A task owns whole samples
// (all the blocks of one sample, or one block of several) and a range of
// their channels, since col2im's windows overlap within a plane; w is
// transposed once so that every product reads it in place.
func convBackwardData[T float32 | float64](s *convShape, dxo, wo, dyo int, dx, w, dy []T) {
	P, R, HW := s.positions(), s.taps(), s.h*s.w
	KK := s.kh * s.kw
	if s.n == 0 {
		return
	}
	pl := s.plan()
	units, per := pl.blocks, 1
	if pl.nb == 1 {
		units, per = s.n, pl.blocks/s.n
	}
	// Cut each group's channels into blocks so that there are enough tasks
	// for several workers even for one sample. The cut does not depend on
	// the number of workers, so neither do the products' shapes (which, on
	// the pure-Go path, choose the order of the sums).
	cb := s.cg
	if tasks := units * s.groups; tasks < convMinTasks {
		cb = max(1, s.cg*tasks/convMinTasks)
	}
	chans := (s.cg + cb - 1) / cb
	// wt[g] = w[g]ᵀ, R rows of O/groups, ldw apart: not a multiple of
	// 1 KiB, where the rows a matrix kernel reads together would share a
	// few sets of the L1 cache.
	ldw := s.og
	if s.og%256 == 0 {
		ldw += 16
	}
	wtBuf := getScratch[T](s.groups * R * ldw)
	defer putScratch(wtBuf)
	wt := *wtBuf
	for g := range s.groups {
		transpose(wt[g*R*ldw:], ldw, w[wo+g*s.og*R:], R, s.og, R)
	}
	flops := 2 * cb * KK * s.og * pl.width * per
	parallelShare(units*s.groups*chans, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
		var col, grad lazyScratch[T]
		defer col.release()
		defer grad.release()
		for t := lo; t < hi; t++ {
			unit, g, c0 := t/(s.groups*chans), t/chans%s.groups, t%chans*cb
			nc := min(cb, s.cg-c0)
			wg := wt[(g*R+c0*KK)*ldw:]
			for v := range per {
				bk := s.block(pl, unit*per+v)
				cols := bk.cols()
				d, ldd := gradients(s, pl, bk, g, dy[dyo:], &grad)
				first := dx[dxo+(bk.n0*s.c+g*s.cg+c0)*HW:]
				if s.pointwise() && bk.ns == 1 {
					gemm(false, false, nc, cols, s.og, 1, wg, ldw, d, ldd, 0, first[bk.p0:], P)
					continue
				}
				if v == 0 {
					for i := range bk.ns {
						clear(first[i*s.c*HW:][:nc*HW])
					}
				}
				ldc := padLd(cols)
				c := col.get(cb * KK * padLd(pl.width))
				gemm(false, false, nc*KK, cols, s.og, 1, wg, ldw, d, ldd, 0, c, ldc)
				for i := range bk.ns {
					col2im(s, nc, c[i*bk.np:], bk.p0, bk.np, ldc, first[i*s.c*HW:])
				}
			}
		}
	})
}

// convBackwardWeight computes dw from x and dy. Tasks own ranges of input
// channels of a group: each computes its rows of dwᵀ = col·dyᵀ (whose
// second operand, dy's rows, is far smaller than colᵀ to transpose) over
// every block of columns in order, from im2col of its own channels only,
// and transposes them into dw. No two tasks add into the same element, so
// the result does not depend on the number of goroutines.
func convBackwardWeight[T float32 | float64](s *convShape, xo, dwo, dyo int, x, dw, dy []T) {
	R, HW, KK := s.taps(), s.h*s.w, s.kh*s.kw
	out := dw[dwo : dwo+s.o*R]
	if s.n == 0 {
		clear(out)
		return
	}
	if xf, ok := any(x).([]float32); ok && s.batchMinorWeight() {
		convBackwardWeightBatchMinor(s, xo, xf, dwo, any(dw).([]float32), dyo, any(dy).([]float32))
		return
	}
	// A task reads and writes its rows of dwᵀ (R/tasks × O/groups) once per
	// block: with many output channels that outweighs a larger im2col
	// block, so the blocks are then as wide as the limit allows.
	least := 0
	if s.og >= 256 {
		least = 256
	}
	pl := s.planAtLeast(least)
	chunks := min(s.cg, runtime.GOMAXPROCS(0))
	cb := (s.cg + chunks - 1) / chunks
	chunks = (s.cg + cb - 1) / cb
	// With too few channels to share (a stem's 1 or 3), the blocks of
	// columns are cut into convWeightParts runs instead, each summed into
	// its own rows of dwᵀ, and the runs added in order at the end: a fixed
	// cut, so the sums do not depend on the number of goroutines either.
	parts := 1
	if s.groups*s.cg < convWeightSplitChannels && pl.blocks >= convWeightParts {
		chunks, cb, parts = 1, s.cg, convWeightParts
	}
	var partial []T // with parts > 1: each task's rows of dwᵀ
	if parts > 1 {
		buf := getScratch[T](s.groups * parts * R * s.og)
		defer putScratch(buf)
		partial = *buf
	}
	flops := 2 * s.og * cb * KK * pl.width * pl.blocks / parts
	parallelShare(s.groups*chunks*parts, max(1, minParallelFlops/max(1, flops)), func(lo, hi int) {
		var col, grad lazyScratch[T]
		defer col.release()
		defer grad.release()
		var accBuf *[]T
		if parts == 1 {
			accBuf = getScratch[T](cb * KK * s.og)
			defer putScratch(accBuf)
		}
		for t := lo; t < hi; t++ {
			gc, part := t/parts, t%parts
			g, c0 := gc/chunks, gc%chunks*cb
			nc := min(cb, s.cg-c0)
			rows := nc * KK
			var acc []T // rows (c0·KK …) of dw[g]ᵀ
			if parts == 1 {
				acc = (*accBuf)[:rows*s.og]
			} else {
				acc = partial[(g*parts+part)*R*s.og:][:rows*s.og]
			}
			clear(acc)
			for u := part * pl.blocks / parts; u < (part+1)*pl.blocks/parts; u++ {
				bk := s.block(pl, u)
				cols := bk.cols()
				var b []T
				ldb := padLd(cols)
				if s.pointwise() && bk.ns == 1 {
					b, ldb = x[xo+(bk.n0*s.c+g*s.cg+c0)*HW+bk.p0:], s.positions()
				} else {
					b = col.get(cb * KK * padLd(pl.width))
					for i := range bk.ns {
						im2col(s, nc, x[xo+((bk.n0+i)*s.c+g*s.cg+c0)*HW:], bk.p0, bk.np, b[i*bk.np:], ldb)
					}
				}
				d, ldd := gradients(s, pl, bk, g, dy[dyo:], &grad)
				gemm(false, true, rows, s.og, cols, 1, b, ldb, d, ldd, 1, acc, s.og)
			}
			if parts == 1 {
				transpose(out[g*s.og*R+c0*KK:], R, acc, s.og, rows, s.og)
			}
		}
	})
	if parts == 1 {
		return
	}
	for g := range s.groups {
		sum := partial[g*parts*R*s.og:][:R*s.og]
		for part := 1; part < parts; part++ {
			for i, v := range partial[(g*parts+part)*R*s.og:][:R*s.og] {
				sum[i] += v
			}
		}
		transpose(out[g*s.og*R:], R, sum, s.og, R, s.og)
	}
}

// convWeightSplitChannels is the number of channels (times groups) below
// which the weight gradient cuts the columns rather than the channels among
// its tasks, into convWeightParts runs.
const (
	convWeightSplitChannels = 4
	convWeightParts         = 8
)

// transpose writes the transpose of the rows×cols matrix src (row stride
// lds) into dst (row stride ldd), with the kernel path in use.
func transpose[T float32 | float64](dst []T, ldd int, src []T, lds, rows, cols int) {
	transposeWith(sgemmActive.Load(), dst, ldd, src, lds, rows, cols)
}

// tapRows returns, for tap row kh and the nrows output rows from oh0, the
// output rows [a, b) whose input row oh·sh − ph + kh·dh lies in the plane.
func (s *convShape) tapRows(kh, oh0, nrows int) (a, b int) {
	off := kh*s.dh - s.ph
	a, b = oh0, oh0+nrows
	if off < 0 {
		a = max(a, (-off+s.sh-1)/s.sh)
	}
	if s.h-off > 0 {
		b = min(b, (s.h-off+s.sh-1)/s.sh)
	} else {
		b = a
	}
	a = min(a, oh0+nrows)
	return a, max(a, b)
}

// tapCols returns, for tap column kw, the input column of output column 0
// (iw0) and the output columns [v0, v1) whose input column iw0 + ow·sw
// lies in the plane.
func (s *convShape) tapCols(kw int) (iw0, v0, v1 int) {
	iw0 = kw*s.dw - s.pw
	if iw0 < 0 {
		v0 = (-iw0 + s.sw - 1) / s.sw
	}
	if s.w-iw0 > 0 {
		v1 = (s.w - iw0 + s.sw - 1) / s.sw
	}
	v0 = min(v0, s.ow)
	return iw0, v0, max(v0, min(v1, s.ow))
}

// laneMask returns the mask of the lanes j < 16 with lo ≤ j < hi.
func laneMask(lo, hi int) uint32 {
	lo, hi = max(0, lo), min(16, hi)
	if lo >= hi {
		return 0
	}
	return (uint32(1)<<hi - 1) &^ (uint32(1)<<lo - 1)
}

// im2col writes the column matrix of nc channels (x holds their planes from
// its first element) for output positions [p0, p0+np), whole output rows,
// into col, a row-major matrix of nc·KH·KW rows with row stride ld. Each
// tap's rows, for all nc channels at once, go to one copyRows per 16
// output columns.
func im2col[T float32 | float64](s *convShape, nc int, x []T, p0, np int, col []T, ld int) {
	OW, HW, KK := s.ow, s.h*s.w, s.kh*s.kw
	oh0, nrows := p0/OW, np/OW
	for kh := range s.kh {
		a, b := s.tapRows(kh, oh0, nrows)
		ih := a*s.sh - s.ph + kh*s.dh
		for kw := range s.kw {
			r := kh*s.kw + kw
			if a > oh0 || b < oh0+nrows {
				for c := range nc {
					dst := col[(c*KK+r)*ld:][:np]
					clear(dst[:(a-oh0)*OW])
					clear(dst[(b-oh0)*OW:])
				}
			}
			if a == b {
				continue
			}
			iw0, v0, v1 := s.tapCols(kw)
			for j := 0; j < OW; j += 16 {
				copyRows(col[r*ld+(a-oh0)*OW+j:], OW, x, ih*s.w+iw0+j*s.sw, s.sh*s.w, b-a, s.sw,
					laneMask(v0-j, v1-j), laneMask(0, OW-j), nc, KK*ld, HW)
			}
		}
	}
}

// col2im adds a column matrix (nc·KH·KW rows of np positions from p0, whole
// output rows, row stride ld) back into the nc input planes starting at dx,
// each tap's rows for all nc channels at once, with one addRows per 16
// output columns.
func col2im[T float32 | float64](s *convShape, nc int, col []T, p0, np, ld int, dx []T) {
	OW, HW, KK := s.ow, s.h*s.w, s.kh*s.kw
	oh0, nrows := p0/OW, np/OW
	for kh := range s.kh {
		a, b := s.tapRows(kh, oh0, nrows)
		if a == b {
			continue
		}
		ih := a*s.sh - s.ph + kh*s.dh
		for kw := range s.kw {
			r := kh*s.kw + kw
			iw0, v0, v1 := s.tapCols(kw)
			for j := v0 &^ 15; j < v1; j += 16 {
				addRows(dx, ih*s.w+iw0+j*s.sw, s.sh*s.w, col[r*ld+(a-oh0)*OW+j:], OW, b-a, s.sw,
					laneMask(v0-j, v1-j), nc, HW, KK*ld)
			}
		}
	}
}

// convViaMinChannels is the least number of input channels per group for
// which the data gradient runs as the transposed convolution's forward pass.
const convViaMinChannels = 32

// transposed returns the convolution whose forward pass computes s's data
// gradient, and whether there is one: with unit strides and dilations, dx
// is dy convolved with the kernel flipped in both axes and its channel axes
// swapped, padded by KH−1−ph and KW−1−pw (which must not be negative).
func (s *convShape) transposed() (convShape, bool) {
	if s.sh != 1 || s.sw != 1 || s.dh != 1 || s.dw != 1 || s.ph > s.kh-1 || s.pw > s.kw-1 {
		return convShape{}, false
	}
	return convShape{
		n: s.n, c: s.o, h: s.oh, w: s.ow,
		o: s.c, kh: s.kh, kw: s.kw,
		oh: s.h, ow: s.w,
		sh: 1, sw: 1, ph: s.kh - 1 - s.ph, pw: s.kw - 1 - s.pw, dh: 1, dw: 1,
		groups: s.groups, cg: s.og, og: s.cg,
	}, true
}

// convPointwiseDataChannels is the least number of input channels per
// group from which a 1×1 convolution's data gradient runs as
// convBackwardData's product, dx = wᵀ·dy in place, rather than as the
// transposed forward pass: measured on ResNet-50's 1×1 layers (batch 8) it
// takes 13–35% less time from 256 channels up (256→1024, 512→2048,
// 1024→256, 2048→512), and 12% more at 64 (64→256 on 56×56 planes).
const convPointwiseDataChannels = 256

// convBackwardDataVia computes dx from dy and w as the forward pass of the
// transposed convolution where there is one and s has at least
// convViaMinChannels input channels per group (the transposed product has
// that many rows) — except 1×1 kernels with convPointwiseDataChannels or
// more — else by convBackwardData. The forward pass's products
// are deeper (O/groups·KH·KW rather than O/groups) and nothing is added back
// by col2im; measured on ResNet-18's stages this is 0–10% faster.
func convBackwardDataVia[T float32 | float64](s *convShape, dxo, wo, dyo int, dx, w, dy []T) {
	t, ok := s.transposed()
	if ok && tapMajorForward(&t, dyo, wo, dxo, dy, w, dx, true) {
		return
	}
	if !ok || s.cg < convViaMinChannels || s.pointwise() && s.cg >= convPointwiseDataChannels {
		convBackwardData(s, dxo, wo, dyo, dx, w, dy)
		return
	}
	KK := s.kh * s.kw
	buf := getScratch[T](s.o * s.cg * KK)
	defer putScratch(buf)
	wf := *buf // wf[g·cg + c, o, k] = w[g·og + o, c, KK−1−k]
	parallelFor(s.c, max(1, (1<<15)/max(1, s.og*KK)), func(lo, hi int) {
		for gc := lo; gc < hi; gc++ {
			g, c := gc/s.cg, gc%s.cg
			dst := wf[gc*s.og*KK:][:s.og*KK]
			for o := range s.og {
				src := w[wo+((g*s.og+o)*s.cg+c)*KK:][:KK]
				d := dst[o*KK : (o+1)*KK]
				for k, v := range src {
					d[KK-1-k] = v
				}
			}
		}
	})
	convForward(&t, dyo, 0, dxo, dy, wf, dx)
}
