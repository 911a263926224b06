// Declarations that NVRTC provides implicitly, for checking the kernel
// sources with clang's CUDA front end (see kernels_clang_test.go): built-in
// variables, math functions (resolved to libdevice names), warp shuffles and
// atomics. Only a syntax and type check: the PTX it yields is not used.
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __CUDACC__
#define CUDA_VERSION 11050
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define HUGE_VAL __builtin_huge_val()
#define HUGE_VALF __builtin_huge_valf()
typedef unsigned long size_t;
#include <__clang_cuda_builtin_vars.h>
#include <__clang_cuda_libdevice_declares.h>
#include <__clang_cuda_device_functions.h>
#include <__clang_cuda_math.h>

static __device__ float __shfl_xor_sync(unsigned m, float v, int l) { return __nvvm_shfl_sync_bfly_f32(m, v, l, 0x1f); }
static __device__ int __shfl_xor_sync(unsigned m, int v, int l) { return __nvvm_shfl_sync_bfly_i32(m, v, l, 0x1f); }
static __device__ unsigned __shfl_xor_sync(unsigned m, unsigned v, int l) { return (unsigned)__nvvm_shfl_sync_bfly_i32(m, (int)v, l, 0x1f); }
static __device__ double __shfl_xor_sync(unsigned m, double v, int l) {
  long long b = __double_as_longlong(v);
  int lo = __nvvm_shfl_sync_bfly_i32(m, (int)b, l, 0x1f), hi = __nvvm_shfl_sync_bfly_i32(m, (int)(b >> 32), l, 0x1f);
  return __longlong_as_double(((long long)hi << 32) | (unsigned)lo);
}
static __device__ long long __shfl_xor_sync(unsigned m, long long v, int l) {
  int lo = __nvvm_shfl_sync_bfly_i32(m, (int)v, l, 0x1f), hi = __nvvm_shfl_sync_bfly_i32(m, (int)(v >> 32), l, 0x1f);
  return ((long long)hi << 32) | (unsigned)lo;
}
static __device__ float atomicAdd(float *p, float v) { return __nvvm_atom_add_gen_f(p, v); }
static __device__ double atomicAdd(double *p, double v) { return __nvvm_atom_add_gen_d(p, v); }
static __device__ int atomicAdd(int *p, int v) { return __nvvm_atom_add_gen_i(p, v); }
static __device__ unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) { return __nvvm_atom_add_gen_ll((long long *)p, v); }
static __device__ unsigned long long atomicMin(unsigned long long *p, unsigned long long v) { return __nvvm_atom_min_gen_ull(p, v); }
static __device__ int atomicCAS(int *p, int c, int v) { return __nvvm_atom_cas_gen_i(p, c, v); }
static __device__ unsigned long long atomicCAS(unsigned long long *p, unsigned long long c, unsigned long long v) { return __nvvm_atom_cas_gen_ll((long long *)p, c, v); }
