package optim

import (
	"math"

	"github.com/flockml/flock/autograd"
)

// ClipGradNorm scales the gradients of params in place so that their global
// L2 norm is at most maxNorm, as torch.nn.utils.clip_grad_norm_ does:
// with total norm n, each gradient is multiplied by maxNorm/(n+1e-6) when
// that factor is below 1. It returns n (before clipping).
func ClipGradNorm(params []*autograd.Var, maxNorm float64) float64 {
	var total float64
	for _, p := range params {
		if g := p.Grad(); g != nil {
			total += g.SquaredNorm()
		}
	}
	n := math.Sqrt(total)
	if coef := maxNorm / (n + 1e-6); coef < 1 {
		for _, p := range params {
			if g := p.Grad(); g != nil {
				g.MulScalarInPlace(coef)
			}
		}
	}
	return n
}
