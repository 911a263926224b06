package cpu

// The float32 loops of the non-GEMM kernels have vector forms in Go
// assembly (files *_amd64.s) for the AVX-512 and AVX2 kernel paths, and the
// plain Go loops they replace stay as their pure-Go twins: the "go" path,
// and the reference the tests compare the vector forms with. The path is
// the one the matrix products use (KernelPath, set by FLOCK_CPU_KERNELS), so
// one setting switches every kernel.
//
// An elementwise vector loop runs its last few elements through the same
// instructions under a lane mask, so an element's value does not depend on
// how a tensor was split between goroutines. Reductions keep a fixed order
// per output: their vector forms sum in a different order from the Go
// loops, so the paths agree to rounding, and each is deterministic.

// vecLevel names the instruction set of the vector loops in use.
type vecLevel uint8

const (
	vecGo     vecLevel = iota // pure Go
	vecAVX2                   // AVX2 and FMA, 8 lanes
	vecAVX512                 // AVX-512F, 16 lanes
)

// activeVec returns the vector level of the kernel path in use.
func activeVec() vecLevel {
	switch KernelPath() {
	case "avx512":
		return vecAVX512
	case "avx2":
		return vecAVX2
	}
	return vecGo
}
