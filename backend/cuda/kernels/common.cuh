// Definitions shared by flock's CUDA kernels. The sources include nothing
// from the CUDA toolkit, so that NVRTC compiles them with no headers and nvcc
// (kernels/gen_ptx.sh) compiles them the same way.
#pragma once

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

#define MAXD 8

// Dims is the shape or the element strides of a view, padded to MAXD axes.
// It travels by value in the kernel's parameter buffer.
struct Dims {
  i64 v[MAXD];
};

// Storage types with no arithmetic of their own.
struct f16 {
  unsigned short x;
};
struct bf16 {
  unsigned short x;
};
struct b8 {
  unsigned char x;
};

__device__ __forceinline__ float f16_to_f(f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x));
  return f;
}
__device__ __forceinline__ f16 f_to_f16(float f) {
  f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f));
  return h;
}
__device__ __forceinline__ float bf16_to_f(bf16 h) { return __int_as_float(((u32)h.x) << 16); }
// Round to nearest even; NaN stays a (quiet) NaN.
__device__ __forceinline__ bf16 f_to_bf16(float f) {
  u32 b = (u32)__float_as_int(f);
  bf16 h;
  if (f != f) {
    h.x = (unsigned short)((b >> 16) | 0x40);
    return h;
  }
  b += 0x7fffu + ((b >> 16) & 1u);
  h.x = (unsigned short)(b >> 16);
  return h;
}

// Conversions between every pair of element types: floats pass through
// double (exact for every float source), integers through long long, and
// narrow float destinations round from float, as the CPU backend does.
template <typename T> struct Num;
template <> struct Num<float> {
  static const bool is_int = false;
  __device__ static double to_d(float x) { return x; }
  __device__ static float from_d(double x) { return (float)x; }
  __device__ static float from_i(i64 x) { return (float)x; }
};
template <> struct Num<double> {
  static const bool is_int = false;
  __device__ static double to_d(double x) { return x; }
  __device__ static double from_d(double x) { return x; }
  __device__ static double from_i(i64 x) { return (double)x; }
};
template <> struct Num<f16> {
  static const bool is_int = false;
  __device__ static double to_d(f16 x) { return f16_to_f(x); }
  __device__ static f16 from_d(double x) { return f_to_f16((float)x); }
  __device__ static f16 from_i(i64 x) { return f_to_f16((float)x); }
};
template <> struct Num<bf16> {
  static const bool is_int = false;
  __device__ static double to_d(bf16 x) { return bf16_to_f(x); }
  __device__ static bf16 from_d(double x) { return f_to_bf16((float)x); }
  __device__ static bf16 from_i(i64 x) { return f_to_bf16((float)x); }
};
template <> struct Num<int> {
  static const bool is_int = true;
  __device__ static i64 to_i(int x) { return x; }
  __device__ static double to_d(int x) { return x; }
  __device__ static int from_d(double x) { return (int)x; }
  __device__ static int from_i(i64 x) { return (int)x; }
};
template <> struct Num<i64> {
  static const bool is_int = true;
  __device__ static i64 to_i(i64 x) { return x; }
  __device__ static double to_d(i64 x) { return (double)x; }
  __device__ static i64 from_d(double x) { return (i64)x; }
  __device__ static i64 from_i(i64 x) { return x; }
};
template <> struct Num<unsigned char> {
  static const bool is_int = true;
  __device__ static i64 to_i(unsigned char x) { return x; }
  __device__ static double to_d(unsigned char x) { return x; }
  __device__ static unsigned char from_d(double x) { return (unsigned char)(int)x; }
  __device__ static unsigned char from_i(i64 x) { return (unsigned char)x; }
};
template <> struct Num<b8> {
  static const bool is_int = true;
  __device__ static i64 to_i(b8 x) { return x.x != 0; }
  __device__ static double to_d(b8 x) { return x.x != 0; }
  __device__ static b8 from_d(double x) {
    b8 r;
    r.x = x != 0;
    return r;
  }
  __device__ static b8 from_i(i64 x) {
    b8 r;
    r.x = x != 0;
    return r;
  }
};

template <typename D, typename S, bool SI> struct CvtImpl;
template <typename D, typename S> struct CvtImpl<D, S, true> {
  __device__ static D go(S x) { return Num<D>::from_i(Num<S>::to_i(x)); }
};
template <typename D, typename S> struct CvtImpl<D, S, false> {
  __device__ static D go(S x) { return Num<D>::from_d(Num<S>::to_d(x)); }
};
template <typename D, typename S> __device__ __forceinline__ D cvt(S x) {
  return CvtImpl<D, S, Num<S>::is_int>::go(x);
}

// Offsets of linear element i of a view of nd axes (row-major order) in K
// operands with the given strides.
template <int K>
__device__ __forceinline__ void offsets(i64 i, int nd, const Dims &shape, const Dims *st, i64 *off) {
#pragma unroll
  for (int k = 0; k < K; k++) off[k] = 0;
  // Unrolled over MAXD so that every index into the Dims is a constant: a
  // loop bounded by nd indexes them at run time, which copies the parameters
  // to local memory (a 128–320-byte stack frame per thread on sm_90).
#pragma unroll
  for (int d = MAXD - 1; d >= 0; d--) {
    if (d >= nd) continue;
    i64 n = shape.v[d];
    i64 c = i % n;
    i /= n;
#pragma unroll
    for (int k = 0; k < K; k++) off[k] += c * st[k].v[d];
  }
}

// Grid-stride loop over [0, n).
#define FOR_N(i, n) for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// Block-wide reductions of one value per thread; blockDim.x is a multiple
// of 32, at most 1024. Every thread receives the result. shm holds 32
// values.
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename T> __device__ T block_sum(T v, T *shm) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) shm[w] = v;
  __syncthreads();
  int nw = blockDim.x >> 5;
  v = lane < nw ? shm[lane] : (T)0;
  v = warp_sum(v);
  return v;
}
template <typename T> __device__ __forceinline__ T fmax_nan(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> __device__ T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename T> __device__ T block_max(T v, T *shm) {
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shm[w] = v;
  __syncthreads();
  int nw = blockDim.x >> 5;
  v = lane < nw ? shm[lane] : shm[0];
  v = warp_max(v);
  return v;
}

// neg_inf is −∞ as a double.
__device__ __forceinline__ double neg_inf() { return __longlong_as_double((i64)0xfff0000000000000ULL); }

// Records the smallest failing position in *err (initialised to the
// largest i64 by the host), for errors that a kernel detects.
__device__ __forceinline__ void report_error(i64 *err, i64 pos) {
  atomicMin((unsigned long long *)err, (unsigned long long)pos);
}
