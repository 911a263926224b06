package cuda

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

// SGDParams are the settings of one fused SGD update, with PyTorch's
// meaning (backend.SGDParams).
type SGDParams = backend.SGDParams

var (
	_ backend.FusedSGD   = (*Backend)(nil)
	_ backend.FusedAdamW = (*Backend)(nil)
)

// SGDStep updates param in place from grad in one kernel:
//
//	g ← g + λ·p;  b ← μ·b + (1−τ)·g (b ← g first);  g ← g + μ·b (Nesterov) or b;
//	p ← p − lr·g.
//
// param, grad and buf (the momentum buffer; the zero View when Momentum is
// 0) are contiguous views of one float dtype and shape.
func (b *Backend) SGDStep(param, grad, buf backend.View, p SGDParams) error {
	const k = "sgd"
	if err := b.optimArgs(k, param, grad); err != nil {
		return err
	}
	if p.Momentum != 0 {
		if err := b.checkDense(k, "momentum buffer", buf, param.DType, param.Shape); err != nil {
			return err
		}
	}
	n := param.NumElements()
	a := new(Args)
	a.Ptr(b.ptr(param)).Ptr(b.ptr(grad)).Ptr(b.optPtr(buf)).I64(int64(n)).F64(p.LR).F64(p.Momentum).F64(p.Dampening).
		F64(p.WeightDecay).Int(boolInt(p.Nesterov)).Int(boolInt(p.First))
	return b.launchN("optim", "sgd_"+typeTag(param.DType), n, a)
}

// AdamWParams are the settings of one fused AdamW update; Step counts from
// 1 (backend.AdamWParams).
type AdamWParams = backend.AdamWParams

// AdamWStep updates param and the moments m and v in place from grad in one
// kernel (decoupled weight decay, bias-corrected moments, as
// torch.optim.AdamW).
func (b *Backend) AdamWStep(param, grad, m, v backend.View, p AdamWParams) error {
	const k = "adamw"
	if err := b.optimArgs(k, param, grad); err != nil {
		return err
	}
	for i, s := range []backend.View{m, v} {
		if err := b.checkDense(k, []string{"m", "v"}[i], s, param.DType, param.Shape); err != nil {
			return err
		}
	}
	if p.Step < 1 {
		return fmt.Errorf("cuda: %s: step %d, want ≥ 1", k, p.Step)
	}
	bc1 := 1 - math.Pow(p.Beta1, float64(p.Step))
	bc2 := 1 - math.Pow(p.Beta2, float64(p.Step))
	n := param.NumElements()
	a := new(Args)
	a.Ptr(b.ptr(param)).Ptr(b.ptr(grad)).Ptr(b.ptr(m)).Ptr(b.ptr(v)).I64(int64(n)).F64(p.LR).F64(p.Beta1).F64(p.Beta2).
		F64(p.Eps).F64(p.WeightDecay).F64(bc1).F64(bc2)
	return b.launchN("optim", "adamw_"+typeTag(param.DType), n, a)
}

func (b *Backend) optimArgs(kernel string, param, grad backend.View) error {
	if err := floatType(kernel, param.DType); err != nil {
		return err
	}
	if err := b.checkDense(kernel, "param", param, param.DType, nil); err != nil {
		return err
	}
	return b.checkDense(kernel, "grad", grad, param.DType, param.Shape)
}
