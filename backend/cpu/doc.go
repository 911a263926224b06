// Package cpu is flock's reference backend: kernels in Go on host memory,
// parallel over GOMAXPROCS goroutines for large work.
//
// Float32 matrix products (MatMul and the products inside the convolutions)
// run on register-blocked SGEMM micro-kernels in Go assembly — 14×32 for
// AVX-512, 6×16 for AVX2+FMA — over packed panels, chosen at run time from
// the CPU's features; the pure-Go kernels remain for other CPUs and as the
// reference in tests. Elementwise operations, activation gradients,
// normalisation, softmax, pooling, bias sums and the fused optimizer updates
// have AVX-512 and AVX2 loops with Go twins too. FLOCK_CPU_KERNELS=
// avx512|avx2|go|auto forces one path for all of them.
// BLAS32 offers the same SGEMM through gonum's blas.Float32 interface.
//
// Importing the package registers it as "cpu" (the tensor package does so,
// making it the default device). Memory comes from a pool of size classes, so
// that a training loop at steady state allocates nothing new from the Go heap;
// Free returns a buffer to the pool and TrimPool hands idle memory back to the
// garbage collector.
//
// Every kernel accepts Float32 and Float64 (the latter for gradient checks).
// Float16 and BFloat16 are storage types: Copy converts them.
//
// The package passes the conformance suite in backend/backendtest.
package cpu
