package optim

import (
	"math"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// LARSOptions are the settings of LARS beyond the groups' rates and decays.
// A zero TrustCoefficient takes 0.001 (You et al.); a zero Eps takes 1e-8.
type LARSOptions struct {
	Momentum         float64
	Nesterov         bool
	TrustCoefficient float64
	Eps              float64
}

// LARS is layer-wise adaptive rate scaling (You, Gitman & Ginsburg, "Large
// Batch Training of Convolutional Networks", 2017, Algorithm 1) with SGD
// momentum. For each parameter tensor w of a group that adapts, with gradient
// g, decay λ, trust coefficient η_t and rate η:
//
//	r = η_t·‖w‖ / (‖g‖ + λ·‖w‖ + ε)   (r = 1 when ‖w‖ or ‖g‖ is 0)
//	d = r·(g + λ·w)
//
// and for groups with NoAdapt (biases and normalisation parameters, which
// the large-batch literature exempts from both adaptation and decay), d = g.
// The momentum and update then follow SGD: b = μ·b + d (b = d at first),
// d = d + μ·b with Nesterov or d = b, w = w − η·d.
type LARS struct {
	base
	opt     LARSOptions
	adapted map[*autograd.Var]bool // the parameters of groups that adapt
}

var (
	_ Optimizer    = (*LARS)(nil)
	_ UpdateScaler = (*LARS)(nil)
	_ Adaptive     = (*LARS)(nil)
)

// NewLARS returns a LARS optimizer over groups.
func NewLARS(groups []*Group, opt LARSOptions) *LARS {
	if opt.TrustCoefficient == 0 {
		opt.TrustCoefficient = 0.001
	}
	if opt.Eps == 0 {
		opt.Eps = 1e-8
	}
	adapted := map[*autograd.Var]bool{}
	for _, g := range groups {
		if !g.NoAdapt {
			for _, p := range g.Params {
				adapted[p] = true
			}
		}
	}
	return &LARS{base: newBase("LARS", groups, "momentum_buffer"), opt: opt, adapted: adapted}
}

// Step implements Optimizer.
func (o *LARS) Step() {
	o.step++
	o.each(func(g *Group, p *autograd.Var, st map[string]*tensor.Tensor) {
		var d *tensor.Tensor
		if g.NoAdapt {
			d = p.Grad().Clone()
		} else {
			wn := math.Sqrt(p.Value.SquaredNorm())
			gn := math.Sqrt(p.Grad().SquaredNorm())
			r := 1.0
			if wn > 0 && gn > 0 {
				r = o.opt.TrustCoefficient * wn / (gn + g.WeightDecay*wn + o.opt.Eps)
			}
			d = decayed(p, g.WeightDecay)
			d.MulScalarInPlace(r)
		}
		defer d.Release()
		if sc := o.updateScale(p); sc != 1 {
			d.MulScalarInPlace(sc)
		}
		if mu := o.opt.Momentum; mu != 0 {
			b, ok := st["momentum_buffer"]
			if !ok {
				st["momentum_buffer"] = d.Clone()
				b = st["momentum_buffer"]
			} else {
				b.MulScalarInPlace(mu)
				b.AddInPlace(d)
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

// SetUpdateScale implements UpdateScaler.
func (o *LARS) SetUpdateScale(p *autograd.Var, s float64) { o.setUpdateScale(p, s) }

// Adapts implements Adaptive: p's update is scaled by its trust ratio
// unless p's group is NoAdapt (or p is not among the optimizer's).
func (o *LARS) Adapts(p *autograd.Var) bool { return o.adapted[p] }

// SplitForLARS returns two groups of params: those that adapt (and decay)
// and those of rank ≤ 1 — biases and normalisation weights — that do
// neither, the usual split of the large-batch literature.
func SplitForLARS(params []*autograd.Var, names []string, lr, weightDecay float64) []*Group {
	adapt := &Group{LR: lr, WeightDecay: weightDecay}
	fixed := &Group{LR: lr, NoAdapt: true}
	for i, p := range params {
		g := adapt
		if p.Value.Dim() <= 1 {
			g = fixed
		}
		g.Params = append(g.Params, p)
		if names != nil {
			g.Names = append(g.Names, names[i])
		}
	}
	return []*Group{adapt, fixed}
}
