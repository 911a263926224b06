//go:build !amd64 || purego

package cpu

// sumColumnsVec returns 0: other CPUs run the Go loops.
func sumColumnsVec(x []float32, s, c []float64) int { return 0 }

// hasColumns4Vec reports false: other CPUs fold row by row.
func hasColumns4Vec() bool { return false }

// sumColumns4Vec returns 0: other CPUs fold row by row.
func sumColumns4Vec(x []float32, stride int, s, c []float64) int { return 0 }

// sumRunVec returns 0: other CPUs run the Go loops.
func sumRunVec(x []float32, a *acc) int { return 0 }
