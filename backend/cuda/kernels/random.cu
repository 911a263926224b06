// Counter-based random numbers: Philox4x32-10 with the stream layout of
// backend/cpu/random.go, so that every element equals the CPU's bit for bit
// (normal draws up to the last ulp of the float64 transcendental
// functions). Element i of a call is stream position j = offset + i: lane
// j%4 of block j/4, the Philox output of counter (lo(b), hi(b), 0, 0) under
// key (lo(seed), hi(seed)); float64 draws also use counter (lo(b), hi(b), 1, 0).
#include "common.cuh"

struct P4 {
  u32 x[4];
};

__device__ __forceinline__ P4 philox(u64 b, u32 second, u64 seed) {
  u32 c0 = (u32)b, c1 = (u32)(b >> 32), c2 = second, c3 = 0;
  u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  P4 p;
  p.x[0] = c0;
  p.x[1] = c1;
  p.x[2] = c2;
  p.x[3] = c3;
  return p;
}

// lane is word k (0–3) of a Philox block. Selected, not indexed: an index
// known only at run time puts the block in local memory.
__device__ __forceinline__ u32 lane(const P4 &p, u64 k) {
  return (k & 2) ? ((k & 1) ? p.x[3] : p.x[2]) : ((k & 1) ? p.x[1] : p.x[0]);
}

// The float32 uniform of position j: (w >> 8)·2⁻²⁴.
__device__ __forceinline__ double u24(u64 j, u64 seed) {
  P4 w = philox(j >> 2, 0, seed);
  return (double)(lane(w, j) >> 8) * (1.0 / 16777216.0);
}

// The float64 uniform of position j: ((w >> 5)·2²⁶ + (v >> 6))·2⁻⁵³.
__device__ __forceinline__ double u53(u64 j, u64 seed) {
  P4 w = philox(j >> 2, 0, seed), v = philox(j >> 2, 1, seed);
  u64 m = ((u64)(lane(w, j) >> 5) << 26) | (u64)(lane(v, j) >> 6);
  return (double)m * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ double uniform(u64 j, u64 seed, int wide) { return wide ? u53(j, seed) : u24(j, seed); }

// Box–Muller on the lanes (0, 1) or (2, 3) of j's block.
__device__ __forceinline__ double normal(u64 j, u64 seed, int wide) {
  u64 e = j & ~(u64)1;
  double u1 = uniform(e, seed, wide), u2 = uniform(e + 1, seed, wide);
  double r = sqrt(-2.0 * log(1.0 - u1));
  double a = 2.0 * 3.141592653589793 * u2;
  return (j & 1) ? r * sin(a) : r * cos(a);
}

// kind 0: uniform A + (B−A)·u, clamped below B (top is the largest T below
// B); kind 1: normal A + B·z. The product and the sum are rounded each on
// its own, as the CPU backend rounds them: NVRTC would otherwise fuse them
// into one multiply-add, a last-bit difference.
template <typename T>
__device__ void random_fill(T *dst, i64 n, int kind, double a, double b, double top, u64 seed, u64 offset, int wide) {
  FOR_N(i, n) {
    u64 j = offset + (u64)i;
    if (kind == 0) {
      T x = (T)__dadd_rn(a, __dmul_rn(b - a, uniform(j, seed, wide)));
      if (b > a && (double)x >= (double)(T)b) x = (T)top;
      dst[i] = x;
    } else {
      dst[i] = (T)__dadd_rn(a, __dmul_rn(b, normal(j, seed, wide)));
    }
  }
}

// dropout: element i is dropped iff the float32 uniform of position
// offset + i is below prob; kept ones are scaled by 1/(1−prob).
template <typename T>
__device__ void dropout(T *dst, unsigned char *mask, const T *x, i64 n, double prob, double scale, u64 seed, u64 offset) {
  T s = (T)scale;
  FOR_N(i, n) {
    if (u24(offset + (u64)i, seed) < prob) {
      mask[i] = 0;
      dst[i] = 0;
    } else {
      mask[i] = 1;
      dst[i] = x[i] * s;
    }
  }
}

extern "C" __global__ void random_f32(float *dst, i64 n, int kind, double a, double b, double top, u64 seed, u64 offset) {
  random_fill<float>(dst, n, kind, a, b, top, seed, offset, 0);
}
extern "C" __global__ void random_f64(double *dst, i64 n, int kind, double a, double b, double top, u64 seed, u64 offset) {
  random_fill<double>(dst, n, kind, a, b, top, seed, offset, 1);
}
extern "C" __global__ void dropout_f32(float *dst, unsigned char *mask, const float *x, i64 n, double prob, double scale,
                                       u64 seed, u64 offset) {
  dropout<float>(dst, mask, x, n, prob, scale, seed, offset);
}
extern "C" __global__ void dropout_f64(double *dst, unsigned char *mask, const double *x, i64 n, double prob,
                                       double scale, u64 seed, u64 offset) {
  dropout<double>(dst, mask, x, n, prob, scale, seed, offset);
}
