// Reductions of a strided view over some of its axes. The host splits the
// axes into kept ones (one output each, dst row-major) and reduced ones,
// each merged where contiguous. Each output's elements are folded into a
// state in float64: a sum, an extreme with its position, or Welford's
// (count, mean, M2) for the variance, merged across threads with Chan's
// formula. Large reductions with few outputs are split into G chunks per
// output whose states a second kernel merges in order.
#include "common.cuh"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_VAR };

struct St {
  double a, b;
  i64 c;
};

__device__ __forceinline__ St st_init(int op) {
  St s;
  s.a = 0;
  s.b = 0;
  s.c = op == R_VAR ? 0 : -1;
  return s;
}

// better reports whether value v at position p beats the state's.
__device__ __forceinline__ bool better(int op, double v, i64 p, const St &s) {
  if (s.c < 0) return true;
  bool vn = v != v, sn = s.a != s.a;
  if (sn) return vn && p < s.c;
  if (vn) return true;
  bool mx = op == R_MAX || op == R_ARGMAX;
  if (v == s.a) return p < s.c;
  return mx ? v > s.a : v < s.a;
}

// two_sum adds v to the compensated sum (a, b) of a state (Neumaier's
// variant of Kahan summation), so that float64 sums keep their digits.
__device__ __forceinline__ void two_sum(St &s, double v) {
  double t = s.a + v;
  if (fabs(s.a) >= fabs(v))
    s.b += (s.a - t) + v;
  else
    s.b += (v - t) + s.a;
  s.a = t;
}

__device__ __forceinline__ void st_add(int op, St &s, double v, i64 p) {
  switch (op) {
  case R_SUM:
  case R_MEAN:
    two_sum(s, v);
    s.c = 0;
    break;
  case R_VAR: {
    s.c++;
    double d = v - s.a;
    s.a += d / (double)s.c;
    s.b += d * (v - s.a);
    break;
  }
  default:
    if (better(op, v, p, s)) {
      s.a = v;
      s.c = p;
    }
  }
}

__device__ __forceinline__ St st_merge(int op, St s, St t) {
  switch (op) {
  case R_SUM:
  case R_MEAN:
    two_sum(s, t.a);
    s.b += t.b;
    s.c = s.c > t.c ? s.c : t.c;
    return s;
  case R_VAR: {
    if (t.c == 0) return s;
    if (s.c == 0) return t;
    double n = (double)(s.c + t.c), d = t.a - s.a;
    St r;
    r.a = s.a + d * (double)t.c / n;
    r.b = s.b + t.b + d * d * (double)s.c * (double)t.c / n;
    r.c = s.c + t.c;
    return r;
  }
  default:
    if (t.c >= 0 && better(op, t.a, t.c, s)) return t;
    return s;
  }
}

__device__ __forceinline__ St st_shfl(St s, int o) {
  St t;
  t.a = __shfl_xor_sync(0xffffffffu, s.a, o);
  t.b = __shfl_xor_sync(0xffffffffu, s.b, o);
  t.c = __shfl_xor_sync(0xffffffffu, s.c, o);
  return t;
}

// block_merge merges the states of a block's threads; thread 0 gets the
// result.
__device__ St block_merge(int op, St s) {
  __shared__ St shm[32];
  for (int o = 16; o > 0; o >>= 1) s = st_merge(op, s, st_shfl(s, o));
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) shm[w] = s;
  __syncthreads();
  if (w == 0) {
    int nw = blockDim.x >> 5;
    s = lane < nw ? shm[lane] : st_init(op);
    for (int o = 16; o > 0; o >>= 1) s = st_merge(op, s, st_shfl(s, o));
  }
  return s;
}

__device__ __forceinline__ i64 offset_of(i64 i, int nd, const Dims &shape, const Dims &st) {
  i64 o;
  offsets<1>(i, nd, shape, &st, &o);
  return o;
}

// total is a compensated sum's value; a sum that reached ±Inf or NaN
// ignores the (then meaningless) compensation.
__device__ __forceinline__ double total(const St &s) { return s.a - s.a == 0 ? s.a + s.b : s.a; }

template <typename T> __device__ void st_write(int op, T *dst, i64 *dsti, i64 o, St s, i64 nred, i64 corr) {
  switch (op) {
  case R_SUM:
    dst[o] = (T)total(s);
    break;
  case R_MAX:
  case R_MIN:
    dst[o] = (T)s.a;
    break;
  case R_MEAN:
    dst[o] = (T)(total(s) / (double)nred);
    break;
  case R_ARGMAX:
  case R_ARGMIN:
    dsti[o] = s.c;
    break;
  case R_VAR: {
    double den = (double)(s.c - corr);
    if (den < 0) den = 0;
    dst[o] = (T)(s.b / den);
    break;
  }
  }
}

// reduce_block: block b folds chunk b%G of output b/G.
#define REDUCE(N, T)                                                                                 \
  extern "C" __global__ void reduce_block_##N(T *dst, i64 *dsti, St *part, const T *x, int op, i64 nred, \
                                              i64 chunk, i64 groups, i64 corr, int nk, Dims kshape, Dims kst, \
                                              int nr, Dims rshape, Dims rst) {                       \
    i64 o = blockIdx.x / groups, g = blockIdx.x % groups;                                            \
    const T *base = x + offset_of(o, nk, kshape, kst);                                               \
    i64 lo = g * chunk, hi = lo + chunk < nred ? lo + chunk : nred;                                  \
    St s = st_init(op);                                                                              \
    for (i64 r = lo + threadIdx.x; r < hi; r += blockDim.x)                                          \
      st_add(op, s, (double)base[offset_of(r, nr, rshape, rst)], r);                                 \
    s = block_merge(op, s);                                                                          \
    if (threadIdx.x == 0) {                                                                          \
      if (groups == 1)                                                                               \
        st_write<T>(op, dst, dsti, o, s, nred, corr);                                                \
      else                                                                                           \
        part[blockIdx.x] = s;                                                                        \
    }                                                                                                \
  }                                                                                                  \
  extern "C" __global__ void reduce_final_##N(T *dst, i64 *dsti, const St *part, int op, i64 nout, i64 nred, \
                                              i64 groups, i64 corr) {                                \
    FOR_N(o, nout) {                                                                                 \
      St s = part[o * groups];                                                                       \
      for (i64 g = 1; g < groups; g++) s = st_merge(op, s, part[o * groups + g]);                   \
      st_write<T>(op, dst, dsti, o, s, nred, corr);                                                  \
    }                                                                                                \
  }                                                                                                  \
  extern "C" __global__ void reduce_thread_##N(T *dst, i64 *dsti, const T *x, int op, i64 nout, i64 nred, \
                                               i64 corr, int nk, Dims kshape, Dims kst, int nr, Dims rshape, \
                                               Dims rst) {                                           \
    FOR_N(o, nout) {                                                                                 \
      const T *base = x + offset_of(o, nk, kshape, kst);                                             \
      St s = st_init(op);                                                                            \
      for (i64 r = 0; r < nred; r++) st_add(op, s, (double)base[offset_of(r, nr, rshape, rst)], r);  \
      st_write<T>(op, dst, dsti, o, s, nred, corr);                                                  \
    }                                                                                                \
  }
REDUCE(f32, float)
REDUCE(f64, double)
