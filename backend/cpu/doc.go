// Package cpu is flock's reference backend: kernels in pure Go on host
// memory, parallel over GOMAXPROCS goroutines for large work.
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
