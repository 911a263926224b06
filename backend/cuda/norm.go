package cuda

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

func (b *Backend) batchNormArgs(kernel string, x backend.View) (n, ch, sp int, err error) {
	if len(x.Shape) < 2 {
		return 0, 0, 0, fmt.Errorf("cuda: %s: x has shape %v, want [N, C, ...]", kernel, x.Shape)
	}
	if err := floatType(kernel, x.DType); err != nil {
		return 0, 0, 0, err
	}
	if err := b.checkDense(kernel, "x", x, x.DType, nil); err != nil {
		return 0, 0, 0, err
	}
	sp = 1
	for _, d := range x.Shape[2:] {
		sp *= d
	}
	return x.Shape[0], x.Shape[1], sp, nil
}

// statGroups splits the m values of each of k statistics into groups that
// blocks fold separately, enough to occupy the device, each at least a few
// thousand values long.
func (b *Backend) statGroups(m, k int) (chunk, groups int) {
	groups = 1
	if k < 2*b.maxGrid {
		groups = max(1, min((m+4095)/4096, (2*b.maxGrid+k-1)/k))
	}
	chunk = max(1, (m+groups-1)/groups)
	groups = max(1, (m+chunk-1)/chunk)
	return chunk, groups
}

// BatchNorm implements backend.Backend with the CPU backend's semantics:
// batch statistics in training (biased variance saved as 1/√(σ²+eps), the
// running variance updated with the unbiased one), running statistics
// otherwise; an empty batch saves zeros and leaves the running statistics
// alone.
func (b *Backend) BatchNorm(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar backend.View, p backend.NormParams) error {
	const k = "batch_norm"
	n, ch, sp, err := b.batchNormArgs(k, x)
	if err != nil {
		return err
	}
	dt := x.DType
	if err := b.checkDense(k, "y", y, dt, x.Shape); err != nil {
		return err
	}
	for _, a := range []struct {
		name string
		v    backend.View
	}{{"weight", weight}, {"bias", bias}, {"running mean", runningMean}, {"running var", runningVar}, {"save mean", saveMean}, {"save invstd", saveInvStd}} {
		if err := b.checkOptional(k, a.name, a.v, dt, ch); err != nil {
			return err
		}
	}
	m := n * sp
	switch {
	case runningMean.IsZero() != runningVar.IsZero():
		return fmt.Errorf("cuda: %s: running mean and running var must be given together", k)
	case p.Training && (saveMean.IsZero() || saveInvStd.IsZero()):
		return fmt.Errorf("cuda: %s: training needs save mean and save invstd", k)
	case p.Training && !runningMean.IsZero() && m == 1:
		return fmt.Errorf("cuda: %s: expected more than 1 value per channel when training, got input shape %v", k, x.Shape)
	case !p.Training && runningMean.IsZero():
		return fmt.Errorf("cuda: %s: evaluation needs running statistics", k)
	}
	if ch == 0 {
		return nil
	}
	t := typeTag(dt)
	if p.Training && m == 0 {
		if err := b.Fill(saveMean, 0); err != nil {
			return err
		}
		return b.Fill(saveInvStd, 0)
	}
	stat, release, err := b.scratch(16 * ch)
	if err != nil {
		return err
	}
	defer release()
	if p.Training {
		chunk, groups := b.statGroups(m, ch)
		part, releasePart, err := b.scratch(ch * groups * reduceStateSize)
		if err != nil {
			return err
		}
		defer releasePart()
		a := new(Args)
		a.Ptr(part.Ptr()).Ptr(b.ptr(x)).I64(int64(m)).I64(int64(ch)).I64(int64(sp)).I64(int64(chunk)).I64(int64(groups))
		if err := b.eng.launch("norm", "bn_stats_"+t, ch*groups, min(rowThreads(chunk), blockThreads), 0, a); err != nil {
			return err
		}
		f := new(Args)
		f.Ptr(stat.Ptr()).Ptr(b.ptr(saveMean)).Ptr(b.ptr(saveInvStd)).Ptr(b.optPtr(runningMean)).Ptr(b.optPtr(runningVar)).
			Ptr(part.Ptr()).I64(int64(ch)).I64(int64(groups)).F64(p.Eps).F64(p.Momentum)
		if err := b.launchN("norm", "bn_finish_"+t, ch, f); err != nil {
			return err
		}
	} else {
		a := new(Args)
		a.Ptr(stat.Ptr()).Ptr(b.optPtr(saveMean)).Ptr(b.optPtr(saveInvStd)).Ptr(b.ptr(runningMean)).Ptr(b.ptr(runningVar)).
			I64(int64(ch)).F64(p.Eps)
		if err := b.launchN("norm", "bn_eval_stats_"+t, ch, a); err != nil {
			return err
		}
	}
	total := x.NumElements()
	a := new(Args)
	a.Ptr(b.ptr(y)).Ptr(b.ptr(x)).Ptr(stat.Ptr()).Ptr(b.optPtr(weight)).Ptr(b.optPtr(bias)).
		I64(int64(total)).I64(int64(ch)).I64(int64(sp))
	return b.launchN("norm", "bn_apply_"+t, total, a)
}

// BatchNormBackward implements backend.Backend.
func (b *Backend) BatchNormBackward(dx, dweight, dbias, dy, x, weight, saveMean, saveInvStd backend.View, p backend.NormParams) error {
	const k = "batch_norm_backward"
	n, ch, sp, err := b.batchNormArgs(k, x)
	if err != nil {
		return err
	}
	dt := x.DType
	if err := b.checkDense(k, "dy", dy, dt, x.Shape); err != nil {
		return err
	}
	if !dx.IsZero() {
		if err := b.checkDense(k, "dx", dx, dt, x.Shape); err != nil {
			return err
		}
	}
	if saveMean.IsZero() || saveInvStd.IsZero() {
		return fmt.Errorf("cuda: %s: save mean and save invstd are required", k)
	}
	for _, a := range []struct {
		name string
		v    backend.View
	}{{"weight", weight}, {"save mean", saveMean}, {"save invstd", saveInvStd}, {"dweight", dweight}, {"dbias", dbias}} {
		if err := b.checkOptional(k, a.name, a.v, dt, ch); err != nil {
			return err
		}
	}
	if ch == 0 {
		return nil
	}
	t := typeTag(dt)
	m := n * sp
	chunk, groups := b.statGroups(m, ch)
	part, releasePart, err := b.scratch(ch * groups * reduceStateSize)
	if err != nil {
		return err
	}
	defer releasePart()
	coef, releaseCoef, err := b.scratch(32 * ch)
	if err != nil {
		return err
	}
	defer releaseCoef()
	a := new(Args)
	a.Ptr(part.Ptr()).Ptr(b.ptr(dy)).Ptr(b.ptr(x)).Ptr(b.ptr(saveMean)).I64(int64(m)).I64(int64(ch)).I64(int64(sp)).
		I64(int64(chunk)).I64(int64(groups))
	if err := b.eng.launch("norm", "bn_back_stats_"+t, ch*groups, min(rowThreads(chunk), blockThreads), 0, a); err != nil {
		return err
	}
	f := new(Args)
	f.Ptr(b.optPtr(dweight)).Ptr(b.optPtr(dbias)).Ptr(coef.Ptr()).Ptr(part.Ptr()).Ptr(b.optPtr(weight)).
		Ptr(b.ptr(saveMean)).Ptr(b.ptr(saveInvStd)).I64(int64(ch)).I64(int64(groups)).I64(int64(m)).Int(boolInt(p.Training))
	if err := b.launchN("norm", "bn_back_finish_"+t, ch, f); err != nil {
		return err
	}
	if dx.IsZero() {
		return nil
	}
	total := x.NumElements()
	d := new(Args)
	d.Ptr(b.ptr(dx)).Ptr(b.ptr(dy)).Ptr(b.ptr(x)).Ptr(coef.Ptr()).I64(int64(total)).I64(int64(ch)).I64(int64(sp))
	return b.launchN("norm", "bn_back_dx_"+t, total, d)
}

var _ backend.FusedBatchNormReLU = (*Backend)(nil)

// BatchNormReLU implements backend.FusedBatchNormReLU: BatchNorm, then ReLU
// in place over y (a second pass; the contract is the result, which the
// composition in tensor would produce with two more allocations).
func (b *Backend) BatchNormReLU(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar backend.View, p backend.NormParams) error {
	if err := b.BatchNorm(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar, p); err != nil {
		return err
	}
	return b.Unary(backend.ReLU, y, y, 0)
}

// BatchNormReLUBackward implements backend.FusedBatchNormReLU:
// BatchNormBackward of dy·[y > 0], masked into scratch memory.
func (b *Backend) BatchNormReLUBackward(dx, dweight, dbias, dy, y, x, weight, saveMean, saveInvStd backend.View, p backend.NormParams) error {
	const k = "batch_norm_relu_backward"
	if _, _, _, err := b.batchNormArgs(k, x); err != nil {
		return err
	}
	if err := b.checkDense(k, "dy", dy, x.DType, x.Shape); err != nil {
		return err
	}
	if err := b.checkDense(k, "y", y, x.DType, x.Shape); err != nil {
		return err
	}
	masked, release, err := b.scratchView(x.DType, x.Shape)
	if err != nil {
		return err
	}
	defer release()
	if err := b.Binary(backend.ReLUGrad, masked, dy, y); err != nil {
		return err
	}
	return b.BatchNormBackward(dx, dweight, dbias, masked, x, weight, saveMean, saveInvStd, p)
}

// LayerNorm implements backend.Backend: one block per group, mean and
// biased variance in float64.
func (b *Backend) LayerNorm(y, mean, rstd, x, weight, bias backend.View, normSize int, eps float64) error {
	const k = "layer_norm"
	rows, err := backend.CheckLayerNorm("cuda: "+k, b.operandCheck(k), y, mean, rstd, x, weight, bias, normSize)
	if err != nil {
		return err
	}
	dt, d := x.DType, normSize
	if rows == 0 {
		return nil
	}
	a := new(Args)
	a.Ptr(b.ptr(y)).Ptr(b.optPtr(mean)).Ptr(b.optPtr(rstd)).Ptr(b.ptr(x)).Ptr(b.optPtr(weight)).Ptr(b.optPtr(bias)).
		I64(int64(d)).F64(eps)
	return b.eng.launch("norm", "ln_fwd_"+typeTag(dt), rows, min(rowThreads(d), 512), 0, a)
}

// LayerNormBackward implements backend.Backend. dγ and dβ are summed over
// fixed chunks of groups and then across chunks in order, so they do not
// depend on scheduling.
func (b *Backend) LayerNormBackward(dx, dweight, dbias, dy, x, weight, mean, rstd backend.View, normSize int) error {
	const k = "layer_norm_backward"
	rows, err := backend.CheckLayerNormBackward("cuda: "+k, b.operandCheck(k), dx, dweight, dbias, dy, x, weight, mean, rstd, normSize)
	if err != nil {
		return err
	}
	dt, d := x.DType, normSize
	t := typeTag(dt)
	if !dx.IsZero() && rows > 0 {
		a := new(Args)
		a.Ptr(b.ptr(dx)).Ptr(b.ptr(dy)).Ptr(b.ptr(x)).Ptr(b.optPtr(weight)).Ptr(b.ptr(mean)).Ptr(b.ptr(rstd)).I64(int64(d))
		if err := b.eng.launch("norm", "ln_back_dx_"+t, rows, min(rowThreads(d), 512), 0, a); err != nil {
			return err
		}
	}
	if dweight.IsZero() && dbias.IsZero() {
		return nil
	}
	colBlocks := (d + blockThreads - 1) / blockThreads
	groups := max(1, min((rows+31)/32, (2*b.maxGrid+colBlocks-1)/colBlocks))
	chunk := max(1, (rows+groups-1)/groups)
	groups = max(1, (rows+chunk-1)/chunk)
	pw, releaseW, err := b.scratch(8 * groups * d)
	if err != nil {
		return err
	}
	defer releaseW()
	pb, releaseB, err := b.scratch(8 * groups * d)
	if err != nil {
		return err
	}
	defer releaseB()
	if rows == 0 {
		if err := b.eng.zero(pw.Ptr(), 8*groups*d); err != nil {
			return err
		}
		if err := b.eng.zero(pb.Ptr(), 8*groups*d); err != nil {
			return err
		}
	} else {
		a := new(Args)
		a.Ptr(pw.Ptr()).Ptr(pb.Ptr()).Ptr(b.ptr(dy)).Ptr(b.ptr(x)).Ptr(b.ptr(mean)).Ptr(b.ptr(rstd)).
			I64(int64(rows)).I64(int64(d)).I64(int64(chunk)).I64(int64(colBlocks))
		if err := b.eng.launch("norm", "ln_back_wb_"+t, groups*colBlocks, blockThreads, 0, a); err != nil {
			return err
		}
	}
	f := new(Args)
	f.Ptr(b.optPtr(dweight)).Ptr(b.optPtr(dbias)).Ptr(pw.Ptr()).Ptr(pb.Ptr()).I64(int64(groups)).I64(int64(d))
	return b.launchN("norm", "ln_back_wb_final_"+t, d, f)
}
