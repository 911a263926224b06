// Definitions that let a kernel file compile as ordinary C++ on the host,
// each kernel running as a grid of one block of one thread (its grid-stride
// loop then covers every element in order). Used by random_host_test.go to
// run the Philox kernels on the CPU and compare them with the CPU backend;
// kernels that need more than one thread per block (block reductions, the
// tiled matrix product) or inline PTX are not run this way.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#define __device__
#define __global__
#define __shared__ static
#define __forceinline__ inline
struct Dim3 { unsigned x, y, z; };
static Dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) { unsigned long long o = *p; if (v < o) *p = v; return o; }
template <typename T> T __shfl_xor_sync(unsigned, T v, int) { return v; }
inline void __syncthreads() {}
// Out of line, so that a build that contracts a·b + c cannot fuse them
// either (CUDA's __dmul_rn and __dadd_rn are never fused).
__attribute__((noinline)) double __dmul_rn(double a, double b) { return a * b; }
__attribute__((noinline)) double __dadd_rn(double a, double b) { return a + b; }
