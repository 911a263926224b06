package sparse

import (
	"fmt"
	"math"
)

// Probabilities returns the inclusion probabilities of L layers whose
// gradient norms are estimated by norms: p_ℓ = clip(c·norms_ℓ, pMin, 1) with
// c chosen so that Σ p_ℓ = budget·L (water-filling). Probabilities in
// proportion to the norms minimise the variance Σ ‖g_ℓ‖²(1/p_ℓ − 1) of the
// rescaled estimator for a given expected number of layers; the clip keeps
// every layer reachable and no probability above 1. Layers whose norm is
// not yet known (known[ℓ] false) are given the mean of the known norms (all
// the same when none is known). It panics unless 0 < pMin ≤ budget ≤ 1.
func Probabilities(norms []float64, known []bool, budget, pMin float64) []float64 {
	if !(budget > 0 && budget <= 1) || !(pMin > 0 && pMin <= budget) {
		panic(fmt.Sprintf("sparse: Probabilities: budget %v and p_min %v: want 0 < p_min ≤ budget ≤ 1", budget, pMin))
	}
	L := len(norms)
	p := make([]float64, L)
	if budget == 1 {
		for i := range p {
			p[i] = 1
		}
		return p
	}
	m := make([]float64, L)
	var sum float64
	var n int
	for i, v := range norms {
		if known[i] && v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	fill := 1.0
	if n > 0 && sum > 0 {
		fill = sum / float64(n)
	}
	for i, v := range norms {
		m[i] = fill
		if known[i] && v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			m[i] = v
		}
	}
	target := budget * float64(L)
	total := func(c float64) float64 {
		s := 0.0
		for _, v := range m {
			s += min(1, max(pMin, c*v))
		}
		return s
	}
	hi := 1.0
	for total(hi) < target && hi < 1e300 {
		hi *= 2
	}
	lo := 0.0
	for range 200 {
		mid := (lo + hi) / 2
		if total(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	for i, v := range m {
		p[i] = min(1, max(pMin, hi*v))
	}
	return p
}

// Variance returns the variance Σ_ℓ ‖g_ℓ‖²(1/p_ℓ − 1) of the rescaled
// estimator ĝ_ℓ = 1{ℓ sampled}·g_ℓ/p_ℓ for a gradient with layer norms
// norms under independent inclusion with probabilities p.
func Variance(norms, p []float64) float64 {
	v := 0.0
	for i, g := range norms {
		v += g * g * (1/p[i] - 1)
	}
	return v
}
