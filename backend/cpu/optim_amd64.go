//go:build !purego

package cpu

import "github.com/flockml/flock/backend"

//go:noescape
func sgdMomentumAVX512(w, g, b []float32, lr, wd, mu, damp float64, nesterov bool)

//go:noescape
func sgdMomentumAVX2(w, g, b []float32, lr, wd, mu, damp float64, nesterov bool)

// sgdMomentumVec performs an SGD step with momentum (not the first) on a
// leading part of w with the vector loop of the kernel path and returns its
// length, a multiple of sgdBlock; 0 where the path has no vector loop.
func sgdMomentumVec(w, g, b []float32, p backend.SGDParams) int {
	g, b = g[:len(w)], b[:len(w)]
	switch activeVec() {
	case vecAVX512:
		n := len(w) &^ 7
		sgdMomentumAVX512(w[:n], g[:n], b[:n], p.LR, p.WeightDecay, p.Momentum, 1-p.Dampening, p.Nesterov)
		return n
	case vecAVX2:
		n := len(w) &^ 7
		sgdMomentumAVX2(w[:n], g[:n], b[:n], p.LR, p.WeightDecay, p.Momentum, 1-p.Dampening, p.Nesterov)
		return n
	}
	return 0
}
