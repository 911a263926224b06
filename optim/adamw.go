package optim

import (
	"fmt"
	"math"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// AdamWOptions are the settings of AdamW beyond the groups' rates and decays.
// Zero Beta1, Beta2 and Eps take PyTorch's defaults 0.9, 0.999 and 1e-8.
type AdamWOptions struct {
	Beta1, Beta2 float64
	Eps          float64
	AMSGrad      bool
}

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter, "Decoupled
// Weight Decay Regularization", ICLR 2019), as torch.optim.AdamW computes it.
// At step t, with gradient g:
//
//	p = p·(1 − η·λ)
//	m = β₁·m + (1−β₁)·g
//	v = β₂·v + (1−β₂)·g²
//	v̂ = max(v̂, v) with AMSGrad, else v̂ = v
//	p = p − η/(1−β₁ᵗ) · m / (√v̂/√(1−β₂ᵗ) + ε)
//
// t counts the optimizer's steps (PyTorch counts per parameter; the two
// agree whenever every parameter has a gradient at every step).
type AdamW struct {
	base
	opt AdamWOptions
}

var _ Optimizer = (*AdamW)(nil)

// NewAdamW returns an AdamW optimizer over groups.
func NewAdamW(groups []*Group, opt AdamWOptions) *AdamW {
	if opt.Beta1 == 0 {
		opt.Beta1 = 0.9
	}
	if opt.Beta2 == 0 {
		opt.Beta2 = 0.999
	}
	if opt.Eps == 0 {
		opt.Eps = 1e-8
	}
	if opt.Beta1 < 0 || opt.Beta1 >= 1 || opt.Beta2 < 0 || opt.Beta2 >= 1 {
		panic(fmt.Sprintf("optim: AdamW: betas (%v, %v) must lie in [0, 1)", opt.Beta1, opt.Beta2))
	}
	return &AdamW{base: newBase("AdamW", groups, "exp_avg", "exp_avg_sq", "max_exp_avg_sq"), opt: opt}
}

// Step implements Optimizer. Without AMSGrad, where the device has a fused
// AdamW kernel (backend.FusedAdamW), each parameter is updated in one pass
// over memory; otherwise the update is composed from elementwise ops.
func (o *AdamW) Step() {
	o.step++
	t := float64(o.step)
	bc1 := 1 - math.Pow(o.opt.Beta1, t)
	bc2 := 1 - math.Pow(o.opt.Beta2, t)
	o.each(func(g *Group, p *autograd.Var, st map[string]*tensor.Tensor) {
		grad := p.Grad()
		if !o.opt.AMSGrad && tensor.FusedAdamWStep(p.Value, grad, buffer(st, "exp_avg", p), buffer(st, "exp_avg_sq", p),
			tensor.AdamWParams{LR: g.LR, Beta1: o.opt.Beta1, Beta2: o.opt.Beta2, Eps: o.opt.Eps,
				WeightDecay: g.WeightDecay, Step: int(o.step)}) {
			return
		}
		if g.WeightDecay != 0 {
			p.Value.MulScalarInPlace(1 - g.LR*g.WeightDecay)
		}
		m := buffer(st, "exp_avg", p)
		v := buffer(st, "exp_avg_sq", p)
		m.MulScalarInPlace(o.opt.Beta1)
		m.AddScaledInPlace(1-o.opt.Beta1, grad)
		g2 := grad.Square()
		v.MulScalarInPlace(o.opt.Beta2)
		v.AddScaledInPlace(1-o.opt.Beta2, g2)
		g2.Release()
		vhat := v
		if o.opt.AMSGrad {
			vmax := buffer(st, "max_exp_avg_sq", p)
			mx := vmax.Maximum(v)
			vmax.CopyFrom(mx)
			mx.Release()
			vhat = vmax
		}
		denom := vhat.Sqrt()
		denom.MulScalarInPlace(1 / math.Sqrt(bc2))
		denom.AddScalarInPlace(o.opt.Eps)
		upd := m.Div(denom)
		p.Value.AddScaledInPlace(-g.LR/bc1, upd)
		upd.Release()
		denom.Release()
	})
}
