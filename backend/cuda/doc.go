// Package cuda is flock's GPU backend: the kernels of the backend contract on
// NVIDIA GPUs, driven through the CUDA driver API with no cgo.
//
// # Loading
//
// The libraries are opened at run time with purego (dlopen): libcuda.so.1,
// the driver, is required; cuBLAS, NVRTC, cuDNN and NCCL are optional and
// each enables a part of the backend. They are searched for in
// FLOCK_CUDA_LIB_DIR, then by the dynamic loader (LD_LIBRARY_PATH, the ld
// cache), then in /usr/local/cuda/lib64, the system library directories and
// the nvidia/*/lib folders of an installed PyTorch (Open). Importing the
// package probes the driver: with a driver and a GPU, the backend registers
// as "cuda" (GPU 0) and "cuda:<i>"; without, nothing registers, Available
// reports why ("no CUDA driver found (tried ...)"), every test that needs a
// GPU skips, and programs run on the CPU. Only integers and pointers cross
// into C: no structs by value, no callbacks.
//
// # Execution
//
// A Backend owns one GPU through its primary context (shared with the CUDA
// runtime, and so with cuBLAS and cuDNN). A context is current per OS
// thread while goroutines move between threads, so every entry point locks
// its goroutine to the thread and makes the context current first. All
// kernels queue on one compute stream in call order; Write stages host
// bytes through pinned buffers and returns before the copy completes, Read
// and Synchronize wait. Every failed call becomes an *Error naming the
// function ("cuMemAlloc: out of memory (2)").
//
// # Memory
//
// Buffers come from a caching allocator: size classes (multiples of 512
// bytes up to 1 MiB, eight per power of two above), one free list per class
// and stream, and immediate reuse on the same stream. Free returns memory
// to the cache at once — tensors free their storage when its reference
// count drops to zero — so a training step at steady state allocates
// nothing from the driver. A buffer that another stream used (RecordStream)
// waits for an event there before reuse; destroying that stream (a
// communicator's Close) strikes it from the buffers still alive. When the driver runs out of memory
// the cache is emptied and the allocation retried; TrimCache empties it on
// demand and CacheStats reports its counters.
//
// # Kernels
//
// The kernels are CUDA C in kernels/*.cu (embedded), one module per file,
// compiled on first use by NVRTC for the device's architecture, or loaded
// from kernels/<module>.ptx when the package carries PTX made by
// kernels/gen_ptx.sh (nvcc, compute_80). Launch arguments are packed into
// one buffer (Args) passed through cuLaunchKernel's extra parameter.
// Elementwise kernels walk up to eight merged strided axes; reductions fold
// float64 states (compensated sums, Welford's variance) split across blocks
// when outputs are few; softmax, cross-entropy, batch and layer norm
// accumulate in float64; scatters give each line along the axis to one
// thread, so their sums do not depend on scheduling; random numbers follow
// the CPU backend's Philox layout bit for bit.
//
// Matrix products go to cuBLAS (cublasGemmStridedBatchedEx, float32 compute
// with TF32 by Options.TF32; float64 compute for float64) or, without it, to
// a tiled kernel. Convolutions go to cuDNN's legacy API (algorithms found by
// cudnnFind*AlgorithmEx once per shape and cached; FMA math for float32
// unless TF32 is on) or to im2col, a product per group, and col2im.
// Options.Autocast (BFloat16 or Float16) rounds the float32 operands of
// matrix products and convolutions to the half type, accumulating in
// float32: the mixed precision of torch.autocast, with weights and
// optimizer state left in float32. SGDStep and AdamWStep are fused
// optimizer updates.
//
// The package passes the conformance suite of backend/backendtest on a
// GPU; without one its tests check the allocator against a fake device,
// the argument packing, the library search order, and every kernel launch
// of the host code against the kernels' parameter lists. When NVRTC and
// ptxas are installed (.ci/cuda_tools.sh fetches them from PyPI),
// TestKernelsCompile compiles every kernel through the package's own NVRTC
// binding for compute_80, compute_86 and compute_90, assembles the PTX for
// sm_80, sm_86 and sm_90, and fails on an error, a warning or a kernel
// using local memory (a stack frame, register spills) on sm_90 (-v prints
// each kernel's registers, local and shared memory); without them, clang's
// CUDA front end checks the sources.
package cuda
