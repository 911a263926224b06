package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/flockml/flock/backend/cpu"
)

// BenchmarkSgemm measures cpu.BLAS32.Sgemm, C = A·B with A M×K and B K×N,
// on 1 and 2 goroutines, in GFLOP/s (2·M·N·K per product). The conv-shaped
// sizes are a 3×3 convolution of 64 channels on a 56×56 plane (3136
// positions × 576 taps × 64 filters) and of 128 channels on 28×28.
func BenchmarkSgemm(b *testing.B) {
	sizes := []struct{ m, k, n int }{
		{256, 256, 256},
		{1024, 1024, 1024},
		{2048, 2048, 2048},
		{3136, 576, 64},
		{784, 1152, 128},
	}
	for _, s := range sizes {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%dx%dx%d/threads=%d", s.m, s.k, s.n, threads), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				fill := func(n int) []float32 {
					x := make([]float32, n)
					for i := range x {
						x[i] = 2*r.Float32() - 1
					}
					return x
				}
				x, y, z := fill(s.m*s.k), fill(s.k*s.n), make([]float32, s.m*s.n)
				impl := cpu.BLAS32{Threads: threads}
				for b.Loop() {
					impl.Sgemm(blas.NoTrans, blas.NoTrans, s.m, s.n, s.k, 1, x, s.k, y, s.n, 0, z, s.n)
				}
				reportGFLOPS(b, 2*float64(s.m*s.n*s.k))
			})
		}
	}
}
