//go:build !amd64 || purego

package cpu

import "github.com/flockml/flock/backend"

// unaryVec reports false: other CPUs run the Go loops.
func unaryVec(op backend.UnaryOp, d, x []float32, arg float64) bool { return false }

// binaryVec reports false: other CPUs run the Go loops.
func binaryVec(op backend.BinaryOp, d, a, b []float32) bool { return false }
