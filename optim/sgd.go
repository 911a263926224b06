package optim

import (
	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// SGDOptions are the settings of SGD beyond the groups' rates and decays.
type SGDOptions struct {
	Momentum  float64
	Dampening float64
	Nesterov  bool
}

// SGD is stochastic gradient descent with momentum, exactly as
// torch.optim.SGD computes it. With gradient g, parameter p, decay λ,
// momentum μ, dampening τ and rate η:
//
//	d = g + λ·p
//	b = d on the first step, then b = μ·b + (1−τ)·d
//	d = d + μ·b (Nesterov) or d = b
//	p = p − η·d
type SGD struct {
	base
	opt SGDOptions
}

var _ Optimizer = (*SGD)(nil)

// NewSGD returns an SGD optimizer over groups.
func NewSGD(groups []*Group, opt SGDOptions) *SGD {
	if opt.Nesterov && (opt.Momentum <= 0 || opt.Dampening != 0) {
		panic("optim: SGD: Nesterov momentum needs a positive momentum and zero dampening")
	}
	return &SGD{base: newBase("SGD", groups, "momentum_buffer"), opt: opt}
}

// Step implements Optimizer. Where the device has a fused SGD kernel
// (backend.FusedSGD), each parameter is updated in one pass over memory;
// otherwise the update is composed from elementwise ops.
func (o *SGD) Step() {
	o.step++
	o.each(func(g *Group, p *autograd.Var, st map[string]*tensor.Tensor) {
		wd := g.WeightDecay
		if sc := o.updateScale(p); sc != 1 {
			// s·(g + λ·p) = (s·g) + (s·λ)·p.
			p.Grad().MulScalarInPlace(sc)
			wd *= sc
		}
		if o.fusedStep(g, wd, p, st) {
			return
		}
		d := decayed(p, wd)
		defer d.Release()
		if mu := o.opt.Momentum; mu != 0 {
			b, ok := st["momentum_buffer"]
			if !ok {
				st["momentum_buffer"] = d.Clone()
				b = st["momentum_buffer"]
			} else {
				b.MulScalarInPlace(mu)
				b.AddScaledInPlace(1-o.opt.Dampening, d)
			}
			if o.opt.Nesterov {
				d.AddScaledInPlace(mu, b)
			} else {
				d.CopyFrom(b)
			}
		}
		p.Value.AddScaledInPlace(-g.LR, d)
	})
}

// SetUpdateScale implements UpdateScaler. The scaled update changes p's
// gradient in place at the step.
func (o *SGD) SetUpdateScale(p *autograd.Var, s float64) { o.setUpdateScale(p, s) }

// decayed returns a new tensor g + λ·p.
func decayed(p *autograd.Var, wd float64) *tensor.Tensor {
	d := p.Grad().Clone()
	if wd != 0 {
		d.AddScaledInPlace(wd, p.Value)
	}
	return d
}

// fusedStep updates p with the device's fused kernel, reporting false when
// it has none (leaving p and its state untouched).
func (o *SGD) fusedStep(g *Group, wd float64, p *autograd.Var, st map[string]*tensor.Tensor) bool {
	q := tensor.SGDParams{LR: g.LR, Momentum: o.opt.Momentum, Dampening: o.opt.Dampening,
		WeightDecay: wd, Nesterov: o.opt.Nesterov}
	if q.Momentum == 0 {
		return tensor.FusedSGDStep(p.Value, p.Grad(), nil, q)
	}
	b, ok := st["momentum_buffer"]
	if !ok {
		b = tensor.Empty(p.Value.Shape(), tensor.Of(p.Value.DType()), tensor.On(p.Value.Device()))
		q.First = true
	}
	if !tensor.FusedSGDStep(p.Value, p.Grad(), b, q) {
		if !ok {
			b.Release()
		}
		return false
	}
	st["momentum_buffer"] = b
	return true
}
