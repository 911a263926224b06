//go:build !amd64 || purego

package cpu

import "github.com/flockml/flock/backend"

// sgdMomentumVec returns 0: other CPUs run the Go loop.
func sgdMomentumVec(w, g, b []float32, p backend.SGDParams) int { return 0 }
