package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// normGrain is the number of elements a normalisation chunk should touch to
// be worth a goroutine.
const normGrain = 16384

// BatchNorm implements backend.Backend. x is [N, C, ...]; for channel c with
// the M = N·∏(spatial) values x_i,
//
//	y_i = (x_i − μ)·s·γ + β,  s = 1/√(σ² + eps),
//
// where in training μ and σ² are the batch mean and biased variance
// (accumulated in float64, variance by a second pass around the mean) and
// saveMean = μ, saveInvStd = s; the running statistics, when given, become
// r_μ ← (1−m)·r_μ + m·μ and r_σ² ← (1−m)·r_σ² + m·σ²·M/(M−1). Outside
// training μ and σ² are the running statistics, and saveMean and saveInvStd,
// when given, receive them in the same form. γ = 1 and β = 0 when weight or
// bias is absent. An empty batch writes zero saved statistics and leaves the
// running ones alone, as PyTorch does; updating running statistics from one
// value per channel is an error, as the unbiased variance is undefined.
func (c *Backend) BatchNorm(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar backend.View, p backend.NormParams) error {
	return batchNorm("cpu: batch_norm", y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar, p, false)
}

// BatchNormReLU implements backend.FusedBatchNormReLU: BatchNorm whose
// output goes through max(·, 0) before it is stored.
func (c *Backend) BatchNormReLU(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar backend.View, p backend.NormParams) error {
	return batchNorm("cpu: batch_norm_relu", y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar, p, true)
}

var _ backend.FusedBatchNormReLU = (*Backend)(nil)

func batchNorm(k string, y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar backend.View, p backend.NormParams, relu bool) error {
	n, ch, sp, err := batchNormArgs(k, x)
	if err != nil {
		return err
	}
	dt := x.DType
	if err := backend.CheckDense(k, nil, "y", y, dt, x.Shape); err != nil {
		return err
	}
	for _, a := range []struct {
		name string
		v    backend.View
	}{{"weight", weight}, {"bias", bias}, {"running mean", runningMean}, {"running var", runningVar}, {"save mean", saveMean}, {"save invstd", saveInvStd}} {
		if err := backend.CheckVector(k, nil, a.name, a.v, dt, ch); err != nil {
			return err
		}
	}
	if runningMean.IsZero() != runningVar.IsZero() {
		return fmt.Errorf("%s: running mean and running var must be given together", k)
	}
	switch {
	case p.Training && (saveMean.IsZero() || saveInvStd.IsZero()):
		return fmt.Errorf("%s: training needs save mean and save invstd", k)
	case p.Training && !runningMean.IsZero() && n*sp == 1:
		return fmt.Errorf("%s: expected more than 1 value per channel when training, got input shape %v", k, x.Shape)
	case !p.Training && runningMean.IsZero():
		return fmt.Errorf("%s: evaluation needs running statistics", k)
	}
	switch dt {
	case backend.Float32:
		batchNormChannels(bnOperands[float32]{
			y: elems[float32](y, y.NumElements()), x: elems[float32](x, x.NumElements()),
			w: elems[float32](weight, ch), b: elems[float32](bias, ch),
			rm: elems[float32](runningMean, ch), rv: elems[float32](runningVar, ch),
			sm: elems[float32](saveMean, ch), sis: elems[float32](saveInvStd, ch),
		}, normLoopsF32(), n, ch, sp, p, relu)
	case backend.Float64:
		batchNormChannels(bnOperands[float64]{
			y: elems[float64](y, y.NumElements()), x: elems[float64](x, x.NumElements()),
			w: elems[float64](weight, ch), b: elems[float64](bias, ch),
			rm: elems[float64](runningMean, ch), rv: elems[float64](runningVar, ch),
			sm: elems[float64](saveMean, ch), sis: elems[float64](saveInvStd, ch),
		}, goNormLoops[float64](), n, ch, sp, p, relu)
	}
	return nil
}

// BatchNormBackward implements backend.Backend. With x̂ = (x − μ)·s from the
// saved statistics, per channel
//
//	dβ = Σ dy,  dγ = Σ dy·x̂,
//	dx = γ·s·(dy − dβ/M − x̂·dγ/M)   (training: μ and s depend on x),
//	dx = γ·s·dy                      (p.Training false: fixed statistics).
//
// dx, dweight and dbias are each written when given; weight absent means
// γ = 1.
func (c *Backend) BatchNormBackward(dx, dweight, dbias, dy, x, weight, saveMean, saveInvStd backend.View, p backend.NormParams) error {
	return batchNormBackward("cpu: batch_norm_backward", dx, dweight, dbias, dy, backend.View{}, x, weight, saveMean, saveInvStd, p)
}

// BatchNormReLUBackward implements backend.FusedBatchNormReLU: the gradient
// dy·[y > 0] is formed as it is read.
func (c *Backend) BatchNormReLUBackward(dx, dweight, dbias, dy, y, x, weight, saveMean, saveInvStd backend.View, p backend.NormParams) error {
	const k = "cpu: batch_norm_relu_backward"
	if y.IsZero() {
		return fmt.Errorf("%s: y is missing", k)
	}
	return batchNormBackward(k, dx, dweight, dbias, dy, y, x, weight, saveMean, saveInvStd, p)
}

// batchNormBackward is BatchNormBackward, of the gradient dy·[y > 0] when y
// is given.
func batchNormBackward(k string, dx, dweight, dbias, dy, y, x, weight, saveMean, saveInvStd backend.View, p backend.NormParams) error {
	n, ch, sp, err := batchNormArgs(k, x)
	if err != nil {
		return err
	}
	dt := x.DType
	if err := backend.CheckDense(k, nil, "dy", dy, dt, x.Shape); err != nil {
		return err
	}
	if !y.IsZero() {
		if err := backend.CheckDense(k, nil, "y", y, dt, x.Shape); err != nil {
			return err
		}
	}
	if !dx.IsZero() {
		if err := backend.CheckDense(k, nil, "dx", dx, dt, x.Shape); err != nil {
			return err
		}
	}
	if saveMean.IsZero() || saveInvStd.IsZero() {
		return fmt.Errorf("%s: save mean and save invstd are required", k)
	}
	for _, a := range []struct {
		name string
		v    backend.View
	}{{"weight", weight}, {"save mean", saveMean}, {"save invstd", saveInvStd}, {"dweight", dweight}, {"dbias", dbias}} {
		if err := backend.CheckVector(k, nil, a.name, a.v, dt, ch); err != nil {
			return err
		}
	}
	switch dt {
	case backend.Float32:
		batchNormGradChannels(bnGradOperands[float32]{
			dx: elems[float32](dx, x.NumElements()), dw: elems[float32](dweight, ch), db: elems[float32](dbias, ch),
			dy: elems[float32](dy, x.NumElements()), y: elems[float32](y, x.NumElements()), x: elems[float32](x, x.NumElements()),
			w: elems[float32](weight, ch), sm: elems[float32](saveMean, ch), sis: elems[float32](saveInvStd, ch),
		}, normLoopsF32(), n, ch, sp, p.Training)
	case backend.Float64:
		batchNormGradChannels(bnGradOperands[float64]{
			dx: elems[float64](dx, x.NumElements()), dw: elems[float64](dweight, ch), db: elems[float64](dbias, ch),
			dy: elems[float64](dy, x.NumElements()), y: elems[float64](y, x.NumElements()), x: elems[float64](x, x.NumElements()),
			w: elems[float64](weight, ch), sm: elems[float64](saveMean, ch), sis: elems[float64](saveInvStd, ch),
		}, goNormLoops[float64](), n, ch, sp, p.Training)
	}
	return nil
}

// batchNormArgs checks x and returns its batch size, channels and the
// number of positions per channel and sample.
func batchNormArgs(kernel string, x backend.View) (n, ch, sp int, err error) {
	if len(x.Shape) < 2 {
		return 0, 0, 0, fmt.Errorf("%s: x has shape %v, want [N, C, ...]", kernel, x.Shape)
	}
	if err := backend.CheckFloat(kernel, x.DType); err != nil {
		return 0, 0, 0, err
	}
	if err := backend.CheckDense(kernel, nil, "x", x, x.DType, nil); err != nil {
		return 0, 0, 0, err
	}
	sp = 1
	for _, d := range x.Shape[2:] {
		sp *= d
	}
	return x.Shape[0], x.Shape[1], sp, nil
}

type bnOperands[T float32 | float64] struct {
	y, x                  []T
	w, b, rm, rv, sm, sis []T
}

// normLoops are the inner loops of batch normalisation over one plane of a
// channel: float data, float64 arithmetic. The Go loops below are the
// reference; normLoopsF32 supplies vector forms. The masked forms serve
// BatchNormReLU: affineReLU applies max(·, 0), and the gradients use
// g = y > 0 ? dy : 0 in place of dy.
type normLoops[T float] struct {
	sum            func(x []T) float64                                  // Σ x
	sumSqDev       func(x []T, mean float64) float64                    // Σ (x − mean)²
	gradSums       func(dy, x []T, mean float64) (sdy, sdyx float64)    // Σ dy, Σ dy·(x − mean)
	affine         func(y, x []T, scale, shift float64)                 // y = x·scale + shift
	gradDx         func(dx, dy, x []T, scale, a, b, mean float64)       // dx = scale·dy − a − b·(x − mean)
	affineReLU     func(y, x []T, scale, shift float64)                 // y = max(x·scale + shift, 0)
	gradSumsMasked func(dy, y, x []T, mean float64) (sdy, sdyx float64) // gradSums of g
	gradDxMasked   func(dx, dy, y, x []T, scale, a, b, mean float64)    // gradDx of g
}

func goNormLoops[T float]() normLoops[T] {
	return normLoops[T]{sum: sumGo[T], sumSqDev: sumSqDevGo[T], gradSums: gradSumsGo[T], affine: affineGo[T], gradDx: gradDxGo[T],
		affineReLU: affineReLUGo[T], gradSumsMasked: gradSumsMaskedGo[T], gradDxMasked: gradDxMaskedGo[T]}
}

func affineReLUGo[T float](y, x []T, scale, shift float64) {
	x = x[:len(y)]
	for j, v := range x {
		h := float64(v)*scale + shift
		if h < 0 {
			h = 0
		}
		y[j] = T(h)
	}
}

func gradSumsMaskedGo[T float](dy, y, x []T, mean float64) (sdy, sdyx float64) {
	y, x = y[:len(dy)], x[:len(dy)]
	for j, v := range x {
		if y[j] > 0 {
			g := float64(dy[j])
			sdy += g
			sdyx += g * (float64(v) - mean)
		}
	}
	return sdy, sdyx
}

func gradDxMaskedGo[T float](dx, dy, y, x []T, scale, a, b, mean float64) {
	dy, y, x = dy[:len(dx)], y[:len(dx)], x[:len(dx)]
	for j, v := range x {
		g := 0.0
		if y[j] > 0 {
			g = float64(dy[j])
		}
		dx[j] = T(scale*g - a - b*(float64(v)-mean))
	}
}

func sumGo[T float](x []T) float64 {
	s := 0.0
	for _, v := range x {
		s += float64(v)
	}
	return s
}

func sumSqDevGo[T float](x []T, mean float64) float64 {
	s := 0.0
	for _, v := range x {
		d := float64(v) - mean
		s += d * d
	}
	return s
}

func gradSumsGo[T float](dy, x []T, mean float64) (sdy, sdyx float64) {
	x = x[:len(dy)]
	for j, v := range x {
		g := float64(dy[j])
		sdy += g
		sdyx += g * (float64(v) - mean)
	}
	return sdy, sdyx
}

func affineGo[T float](y, x []T, scale, shift float64) {
	x = x[:len(y)]
	for j, v := range x {
		y[j] = T(float64(v)*scale + shift)
	}
}

func gradDxGo[T float](dx, dy, x []T, scale, a, b, mean float64) {
	dy, x = dy[:len(dx)], x[:len(dx)]
	for j, v := range x {
		dx[j] = T(scale*float64(dy[j]) - a - b*(float64(v)-mean))
	}
}

// bnBlockBytes bounds the data of a block of channels that the batch-norm
// loops take sample by sample: a small plane is a short run of floats per
// sample and channel, and visiting one channel's runs across the batch reads
// memory in scattered pieces that the hardware prefetchers do not follow;
// a block of channels reads each sample's runs of the block in one sweep,
// and stays in the L2 cache between the passes over it.
const bnBlockBytes = 256 << 10

// bnBlock returns the channels per block for planes of sp values and n
// samples, at most bnMaxBlock.
func bnBlock[T float32 | float64](n, sp int) int {
	var z T
	return max(1, min(bnMaxBlock, bnBlockBytes/max(1, n*sp*int(unsafe.Sizeof(z)))))
}

const bnMaxBlock = 64

func batchNormChannels[T float32 | float64](o bnOperands[T], k normLoops[T], n, ch, sp int, p backend.NormParams, relu bool) {
	apply := k.affine
	if relu {
		apply = k.affineReLU
	}
	m := n * sp
	nb := bnBlock[T](n, sp)
	parallelFor(ch, max(1, normGrain/max(m, 1)), func(lo, hi int) {
		var mean, invstd, acc [bnMaxBlock]float64
		for c0 := lo; c0 < hi; c0 += nb {
			c1 := min(hi, c0+nb)
			// each calls f(i, c, at) for the blocks' runs, sample-major.
			each := func(f func(c, at int)) {
				for i := range n {
					for c := c0; c < c1; c++ {
						f(c, (i*ch+c)*sp)
					}
				}
			}
			switch {
			case p.Training && m == 0:
				for c := c0; c < c1; c++ {
					o.sm[c], o.sis[c] = 0, 0
				}
				continue
			case p.Training:
				clear(acc[:])
				each(func(c, at int) { acc[c-c0] += k.sum(o.x[at : at+sp]) })
				for c := c0; c < c1; c++ {
					mean[c-c0] = acc[c-c0] / float64(m)
				}
				clear(acc[:])
				each(func(c, at int) { acc[c-c0] += k.sumSqDev(o.x[at:at+sp], mean[c-c0]) })
				for c := c0; c < c1; c++ {
					ss := acc[c-c0]
					invstd[c-c0] = 1 / math.Sqrt(ss/float64(m)+p.Eps)
					o.sm[c], o.sis[c] = T(mean[c-c0]), T(invstd[c-c0])
					if o.rm != nil {
						unbiased := ss / float64(m-1)
						o.rm[c] = T((1-p.Momentum)*float64(o.rm[c]) + p.Momentum*mean[c-c0])
						o.rv[c] = T((1-p.Momentum)*float64(o.rv[c]) + p.Momentum*unbiased)
					}
				}
			default:
				for c := c0; c < c1; c++ {
					mean[c-c0] = float64(o.rm[c])
					invstd[c-c0] = 1 / math.Sqrt(float64(o.rv[c])+p.Eps)
					if o.sm != nil {
						o.sm[c] = T(mean[c-c0])
					}
					if o.sis != nil {
						o.sis[c] = T(invstd[c-c0])
					}
				}
			}
			// acc becomes the shift, invstd the scale.
			for c := c0; c < c1; c++ {
				scale, shift := invstd[c-c0], 0.0
				if o.w != nil {
					scale *= float64(o.w[c])
				}
				if o.b != nil {
					shift = float64(o.b[c])
				}
				invstd[c-c0], acc[c-c0] = scale, shift-mean[c-c0]*scale
			}
			each(func(c, at int) { apply(o.y[at:at+sp], o.x[at:at+sp], invstd[c-c0], acc[c-c0]) })
		}
	})
}

type bnGradOperands[T float32 | float64] struct {
	dx, dw, db, dy, x []T
	y                 []T // BatchNormReLU's output, or nil
	w, sm, sis        []T
}

func batchNormGradChannels[T float32 | float64](o bnGradOperands[T], k normLoops[T], n, ch, sp int, training bool) {
	m := n * sp
	nb := bnBlock[T](n, sp)
	parallelFor(ch, max(1, normGrain/max(m, 1)), func(lo, hi int) {
		var sdy, sdyx, scale, a, b [bnMaxBlock]float64
		for c0 := lo; c0 < hi; c0 += nb {
			c1 := min(hi, c0+nb)
			clear(sdy[:])
			clear(sdyx[:])
			for i := range n {
				for c := c0; c < c1; c++ {
					at := (i*ch + c) * sp
					var s, sx float64
					if o.y != nil {
						s, sx = k.gradSumsMasked(o.dy[at:at+sp], o.y[at:at+sp], o.x[at:at+sp], float64(o.sm[c]))
					} else {
						s, sx = k.gradSums(o.dy[at:at+sp], o.x[at:at+sp], float64(o.sm[c]))
					}
					sdy[c-c0] += s
					sdyx[c-c0] += sx
				}
			}
			for c := c0; c < c1; c++ {
				j, invstd := c-c0, float64(o.sis[c])
				sdyx[j] *= invstd
				if o.db != nil {
					o.db[c] = T(sdy[j])
				}
				if o.dw != nil {
					o.dw[c] = T(sdyx[j])
				}
				scale[j] = invstd
				if o.w != nil {
					scale[j] *= float64(o.w[c])
				}
				a[j], b[j] = 0, 0 // dx = scale·dy − a − b·(x − μ)
				if training && m > 0 {
					a[j] = scale[j] * sdy[j] / float64(m)
					b[j] = scale[j] * sdyx[j] * invstd / float64(m)
				}
			}
			if o.dx == nil {
				continue
			}
			for i := range n {
				for c := c0; c < c1; c++ {
					j, at := c-c0, (i*ch+c)*sp
					if o.y != nil {
						k.gradDxMasked(o.dx[at:at+sp], o.dy[at:at+sp], o.y[at:at+sp], o.x[at:at+sp], scale[j], a[j], b[j], float64(o.sm[c]))
					} else {
						k.gradDx(o.dx[at:at+sp], o.dy[at:at+sp], o.x[at:at+sp], scale[j], a[j], b[j], float64(o.sm[c]))
					}
				}
			}
		}
	})
}

// LayerNorm implements backend.Backend. Each group of D = normSize trailing
// elements x_1..x_D becomes
//
//	y_j = (x_j − μ)·r·γ_j + β_j,  μ = mean x,  r = 1/√(mean (x − μ)² + eps),
//
// with mean = μ and rstd = r written per group when given (the biased
// variance, as PyTorch's layer_norm). Statistics accumulate in float64.
func (c *Backend) LayerNorm(y, mean, rstd, x, weight, bias backend.View, normSize int, eps float64) error {
	const k = "cpu: layer_norm"
	rows, err := backend.CheckLayerNorm(k, nil, y, mean, rstd, x, weight, bias, normSize)
	if err != nil {
		return err
	}
	dt, d := x.DType, normSize
	switch dt {
	case backend.Float32:
		layerNormRows(elems[float32](y, rows*d), elems[float32](mean, rows), elems[float32](rstd, rows),
			elems[float32](x, rows*d), elems[float32](weight, d), elems[float32](bias, d), rows, d, eps)
	case backend.Float64:
		layerNormRows(elems[float64](y, rows*d), elems[float64](mean, rows), elems[float64](rstd, rows),
			elems[float64](x, rows*d), elems[float64](weight, d), elems[float64](bias, d), rows, d, eps)
	}
	return nil
}

// LayerNormBackward implements backend.Backend. With x̂ = (x − μ)·r and
// g = dy·γ, per group
//
//	dx_j = r·(g_j − mean g − x̂_j·mean(g·x̂)),
//
// and over all groups dγ_j = Σ dy_j·x̂_j, dβ_j = Σ dy_j. The parameter
// gradients are summed over fixed blocks of groups and then across blocks in
// order, so they do not depend on the number of threads.
func (c *Backend) LayerNormBackward(dx, dweight, dbias, dy, x, weight, mean, rstd backend.View, normSize int) error {
	const k = "cpu: layer_norm_backward"
	rows, err := backend.CheckLayerNormBackward(k, nil, dx, dweight, dbias, dy, x, weight, mean, rstd, normSize)
	if err != nil {
		return err
	}
	dt, d := x.DType, normSize
	switch dt {
	case backend.Float32:
		layerNormGradRows(elems[float32](dx, rows*d), elems[float32](dweight, d), elems[float32](dbias, d),
			elems[float32](dy, rows*d), elems[float32](x, rows*d), elems[float32](weight, d),
			elems[float32](mean, rows), elems[float32](rstd, rows), rows, d)
	case backend.Float64:
		layerNormGradRows(elems[float64](dx, rows*d), elems[float64](dweight, d), elems[float64](dbias, d),
			elems[float64](dy, rows*d), elems[float64](x, rows*d), elems[float64](weight, d),
			elems[float64](mean, rows), elems[float64](rstd, rows), rows, d)
	}
	return nil
}

func layerNormRows[T float32 | float64](y, mean, rstd, x, w, b []T, rows, d int, eps float64) {
	x32, _ := any(x).([]float32)
	y32, _ := any(y).([]float32)
	w32, _ := any(w).([]float32)
	b32, _ := any(b).([]float32)
	vec := x32 != nil && w32 != nil && b32 != nil
	parallelFor(rows, max(1, normGrain/d), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			if vec {
				if mu, rs, ok := layerNormRowVec(y32[r*d:(r+1)*d], x32[r*d:(r+1)*d], w32, b32, eps); ok {
					if mean != nil {
						mean[r] = T(mu)
					}
					if rstd != nil {
						rstd[r] = T(rs)
					}
					continue
				}
			}
			xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
			s := 0.0
			for _, v := range xr {
				s += float64(v)
			}
			mu := s / float64(d)
			ss := 0.0
			for _, v := range xr {
				dv := float64(v) - mu
				ss += dv * dv
			}
			rs := 1 / math.Sqrt(ss/float64(d)+eps)
			if mean != nil {
				mean[r] = T(mu)
			}
			if rstd != nil {
				rstd[r] = T(rs)
			}
			for j, v := range xr {
				h := (float64(v) - mu) * rs
				if w != nil {
					h *= float64(w[j])
				}
				if b != nil {
					h += float64(b[j])
				}
				yr[j] = T(h)
			}
		}
	})
}

// layerNormBlocks is the most blocks of groups whose parameter gradients are
// summed separately.
const layerNormBlocks = 64

func layerNormGradRows[T float32 | float64](dx, dw, db, dy, x, w, mean, rstd []T, rows, d int) {
	blocks := min(rows, layerNormBlocks)
	var pw, pb []float64 // per-block partial sums, blocks × d
	if dw != nil {
		pw = make([]float64, blocks*d)
	}
	if db != nil {
		pb = make([]float64, blocks*d)
	}
	perBlock := (rows + max(blocks, 1) - 1) / max(blocks, 1)
	dx32, _ := any(dx).([]float32)
	dy32, _ := any(dy).([]float32)
	x32, _ := any(x).([]float32)
	w32, _ := any(w).([]float32)
	vec := x32 != nil && w32 != nil && pw != nil && pb != nil
	parallelFor(blocks, max(1, normGrain/max(perBlock*d, 1)), func(lo, hi int) {
		g, xhat := make([]float64, d), make([]float64, d)
		for blk := lo; blk < hi; blk++ {
			r0, r1 := blk*rows/blocks, (blk+1)*rows/blocks
			for r := r0; r < r1; r++ {
				xr, dyr := x[r*d:(r+1)*d], dy[r*d:(r+1)*d]
				mu, rs := float64(mean[r]), float64(rstd[r])
				if vec {
					var dxr []float32
					if dx32 != nil {
						dxr = dx32[r*d : (r+1)*d]
					}
					if layerNormGradRowVec(dxr, dy32[r*d:(r+1)*d], x32[r*d:(r+1)*d], w32,
						pw[blk*d:(blk+1)*d], pb[blk*d:(blk+1)*d], g, xhat, mu, rs) {
						continue
					}
				}
				sg, sgx := 0.0, 0.0
				for j, v := range xr {
					gj, xh := float64(dyr[j]), (float64(v)-mu)*rs
					xhat[j] = xh
					if pw != nil {
						pw[blk*d+j] += gj * xh
					}
					if pb != nil {
						pb[blk*d+j] += gj
					}
					if w != nil {
						gj *= float64(w[j])
					}
					g[j] = gj
					sg += gj
					sgx += gj * xh
				}
				if dx == nil {
					continue
				}
				sg /= float64(d)
				sgx /= float64(d)
				dxr := dx[r*d : (r+1)*d]
				for j := range dxr {
					dxr[j] = T(rs * (g[j] - sg - xhat[j]*sgx))
				}
			}
		}
	})
	for j := range d {
		sw, sb := 0.0, 0.0
		for blk := range blocks {
			if pw != nil {
				sw += pw[blk*d+j]
			}
			if pb != nil {
				sb += pb[blk*d+j]
			}
		}
		if dw != nil {
			dw[j] = T(sw)
		}
		if db != nil {
			db[j] = T(sb)
		}
	}
}
