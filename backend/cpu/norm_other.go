//go:build !amd64 || purego

package cpu

// normLoopsF32 returns the Go loops: other CPUs have no vector forms.
func normLoopsF32() normLoops[float32] { return goNormLoops[float32]() }
