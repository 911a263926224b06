//go:build !amd64 || purego

package cpu

// softmaxRowVec reports false: other CPUs run the Go loops.
func softmaxRowVec(y, x []float32) bool { return false }

// softmaxGradRowVec reports false: other CPUs run the Go loops.
func softmaxGradRowVec(dx, y, dy []float32) bool { return false }

// layerNormRowVec reports false: other CPUs run the Go loops.
func layerNormRowVec(y, x, w, b []float32, eps float64) (mu, rs float64, ok bool) { return 0, 0, false }

// layerNormGradRowVec reports false: other CPUs run the Go loops.
func layerNormGradRowVec(dx, dy, x, w []float32, pw, pb, g, xhat []float64, mu, rs float64) bool {
	return false
}
