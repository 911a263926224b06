// Batch normalisation over [N, C, spatial...] per channel, and layer
// normalisation over rows of the last D elements, forward and backward.
// Statistics accumulate in float64: a channel's values are split into
// groups, each folded by one block (Welford's count, mean and M2; or the
// sums of the backward pass) and merged in order by a second kernel, so
// results do not depend on scheduling.
#include "common.cuh"

struct St {
  double a, b;
  i64 c;
};

__device__ __forceinline__ St welford_merge(St s, St t) {
  if (t.c == 0) return s;
  if (s.c == 0) return t;
  double n = (double)(s.c + t.c), d = t.a - s.a;
  St r;
  r.a = s.a + d * (double)t.c / n;
  r.b = s.b + t.b + d * d * (double)s.c * (double)t.c / n;
  r.c = s.c + t.c;
  return r;
}

__device__ __forceinline__ St shfl_st(St s, int o) {
  St t;
  t.a = __shfl_xor_sync(0xffffffffu, s.a, o);
  t.b = __shfl_xor_sync(0xffffffffu, s.b, o);
  t.c = __shfl_xor_sync(0xffffffffu, s.c, o);
  return t;
}

// block_welford merges the threads' states; thread 0 gets the result.
__device__ St block_welford(St s) {
  __shared__ St shm[32];
  for (int o = 16; o > 0; o >>= 1) s = welford_merge(s, shfl_st(s, o));
  int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) shm[w] = s;
  __syncthreads();
  if (w == 0) {
    int nw = blockDim.x >> 5;
    if (lane < nw) {
      s = shm[lane];
    } else {
      s.a = 0;
      s.b = 0;
      s.c = 0;
    }
    for (int o = 16; o > 0; o >>= 1) s = welford_merge(s, shfl_st(s, o));
  }
  return s;
}

// Element k of channel c's M = n·sp values.
__device__ __forceinline__ i64 bn_at(i64 k, i64 c, i64 ch, i64 sp) { return ((k / sp) * ch + c) * sp + k % sp; }

template <typename T> __device__ void bn_stats(St *part, const T *x, i64 m, i64 ch, i64 sp, i64 chunk, i64 groups) {
  i64 c = blockIdx.x / groups, g = blockIdx.x % groups;
  i64 lo = g * chunk, hi = lo + chunk < m ? lo + chunk : m;
  St s;
  s.a = 0;
  s.b = 0;
  s.c = 0;
  for (i64 k = lo + threadIdx.x; k < hi; k += blockDim.x) {
    double v = x[bn_at(k, c, ch, sp)];
    s.c++;
    double d = v - s.a;
    s.a += d / (double)s.c;
    s.b += d * (v - s.a);
  }
  s = block_welford(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

// bn_finish merges a channel's groups into mean and 1/√(var+eps) (kept in
// float64 in stat for the normalisation), saves them and updates the
// running statistics when given.
template <typename T>
__device__ void bn_finish(double *stat, T *save_mean, T *save_invstd, T *rm, T *rv, const St *part, i64 ch, i64 groups,
                          double eps, double momentum) {
  FOR_N(c, ch) {
    St s = part[c * groups];
    for (i64 g = 1; g < groups; g++) s = welford_merge(s, part[c * groups + g]);
    double mean = s.a, invstd = 1.0 / sqrt(s.b / (double)s.c + eps);
    stat[2 * c] = mean;
    stat[2 * c + 1] = invstd;
    save_mean[c] = (T)mean;
    save_invstd[c] = (T)invstd;
    if (rm) {
      rm[c] = (T)((1 - momentum) * (double)rm[c] + momentum * mean);
      rv[c] = (T)((1 - momentum) * (double)rv[c] + momentum * s.b / (double)(s.c - 1));
    }
  }
}

// bn_eval_stats takes the statistics from the running estimates.
template <typename T>
__device__ void bn_eval_stats(double *stat, T *save_mean, T *save_invstd, const T *rm, const T *rv, i64 ch, double eps) {
  FOR_N(c, ch) {
    double mean = rm[c], invstd = 1.0 / sqrt((double)rv[c] + eps);
    stat[2 * c] = mean;
    stat[2 * c + 1] = invstd;
    if (save_mean) save_mean[c] = (T)mean;
    if (save_invstd) save_invstd[c] = (T)invstd;
  }
}

// bn_apply: y = x·scale + shift, scale = invstd·γ, shift = β − mean·scale.
template <typename T>
__device__ void bn_apply(T *y, const T *x, const double *stat, const T *w, const T *b, i64 total, i64 ch, i64 sp) {
  FOR_N(k, total) {
    i64 c = (k / sp) % ch;
    double scale = stat[2 * c + 1], shift = 0;
    if (w) scale *= (double)w[c];
    if (b) shift = (double)b[c];
    shift -= stat[2 * c] * scale;
    y[k] = (T)((double)x[k] * scale + shift);
  }
}

// Backward partial sums: a = Σ dy, b = Σ dy·(x − mean).
template <typename T>
__device__ void bn_back_stats(St *part, const T *dy, const T *x, const T *mean, i64 m, i64 ch, i64 sp, i64 chunk,
                              i64 groups) {
  __shared__ double shm[32];
  i64 c = blockIdx.x / groups, g = blockIdx.x % groups;
  i64 lo = g * chunk, hi = lo + chunk < m ? lo + chunk : m;
  double mu = mean[c], sdy = 0, sdyx = 0;
  for (i64 k = lo + threadIdx.x; k < hi; k += blockDim.x) {
    i64 at = bn_at(k, c, ch, sp);
    double gv = dy[at];
    sdy += gv;
    sdyx += gv * ((double)x[at] - mu);
  }
  sdy = block_sum(sdy, shm);
  sdyx = block_sum(sdyx, shm);
  if (threadIdx.x == 0) {
    St s;
    s.a = sdy;
    s.b = sdyx;
    s.c = 0;
    part[blockIdx.x] = s;
  }
}

// bn_back_finish writes dγ and dβ and the coefficients of
// dx = scale·dy − a − b·(x − mean).
template <typename T>
__device__ void bn_back_finish(T *dw, T *db, double *coef, const St *part, const T *w, const T *mean, const T *invstd,
                               i64 ch, i64 groups, i64 m, int training) {
  FOR_N(c, ch) {
    double sdy = 0, sdyx = 0;
    for (i64 g = 0; g < groups; g++) {
      sdy += part[c * groups + g].a;
      sdyx += part[c * groups + g].b;
    }
    double is = invstd[c];
    sdyx *= is;
    if (db) db[c] = (T)sdy;
    if (dw) dw[c] = (T)sdyx;
    double scale = is * (w ? (double)w[c] : 1.0), a = 0, b = 0;
    if (training && m > 0) {
      a = scale * sdy / (double)m;
      b = scale * sdyx * is / (double)m;
    }
    coef[4 * c] = scale;
    coef[4 * c + 1] = a;
    coef[4 * c + 2] = b;
    coef[4 * c + 3] = mean[c];
  }
}

template <typename T> __device__ void bn_back_dx(T *dx, const T *dy, const T *x, const double *coef, i64 total, i64 ch, i64 sp) {
  FOR_N(k, total) {
    i64 c = (k / sp) % ch;
    const double *q = coef + 4 * c;
    dx[k] = (T)(q[0] * (double)dy[k] - q[1] - q[2] * ((double)x[k] - q[3]));
  }
}

// Layer norm, one block per row of d elements.
template <typename T>
__device__ void ln_fwd(T *y, T *mean, T *rstd, const T *x, const T *w, const T *b, i64 d, double eps) {
  __shared__ double shm[32];
  i64 r = blockIdx.x;
  const T *xr = x + r * d;
  T *yr = y + r * d;
  double s = 0;
  for (i64 j = threadIdx.x; j < d; j += blockDim.x) s += (double)xr[j];
  double mu = block_sum(s, shm) / (double)d;
  double ss = 0;
  for (i64 j = threadIdx.x; j < d; j += blockDim.x) {
    double dv = (double)xr[j] - mu;
    ss += dv * dv;
  }
  double rs = 1.0 / sqrt(block_sum(ss, shm) / (double)d + eps);
  if (threadIdx.x == 0) {
    if (mean) mean[r] = (T)mu;
    if (rstd) rstd[r] = (T)rs;
  }
  for (i64 j = threadIdx.x; j < d; j += blockDim.x) {
    double h = ((double)xr[j] - mu) * rs;
    if (w) h *= (double)w[j];
    if (b) h += (double)b[j];
    yr[j] = (T)h;
  }
}

// dx = r·(g − mean g − x̂·mean(g·x̂)), g = dy·γ.
template <typename T>
__device__ void ln_back_dx(T *dx, const T *dy, const T *x, const T *w, const T *mean, const T *rstd, i64 d) {
  __shared__ double shm[32];
  i64 r = blockIdx.x;
  double mu = mean[r], rs = rstd[r];
  double sg = 0, sgx = 0;
  for (i64 j = threadIdx.x; j < d; j += blockDim.x) {
    double g = (double)dy[r * d + j] * (w ? (double)w[j] : 1.0);
    sg += g;
    sgx += g * ((double)x[r * d + j] - mu) * rs;
  }
  double mg = block_sum(sg, shm) / (double)d;
  double mgx = block_sum(sgx, shm) / (double)d;
  for (i64 j = threadIdx.x; j < d; j += blockDim.x) {
    double g = (double)dy[r * d + j] * (w ? (double)w[j] : 1.0);
    double xh = ((double)x[r * d + j] - mu) * rs;
    dx[r * d + j] = (T)(rs * (g - mg - xh * mgx));
  }
}

// Partial dγ, dβ of a chunk of rows for a block of columns.
template <typename T>
__device__ void ln_back_wb(double *pw, double *pb, const T *dy, const T *x, const T *mean, const T *rstd, i64 rows, i64 d,
                           i64 chunk, i64 col_blocks) {
  i64 g = blockIdx.x / col_blocks, j = (blockIdx.x % col_blocks) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  i64 lo = g * chunk, hi = lo + chunk < rows ? lo + chunk : rows;
  double sw = 0, sb = 0;
  for (i64 r = lo; r < hi; r++) {
    double gv = dy[r * d + j];
    sw += gv * ((double)x[r * d + j] - (double)mean[r]) * (double)rstd[r];
    sb += gv;
  }
  pw[g * d + j] = sw;
  pb[g * d + j] = sb;
}

template <typename T> __device__ void ln_back_wb_final(T *dw, T *db, const double *pw, const double *pb, i64 groups, i64 d) {
  FOR_N(j, d) {
    double sw = 0, sb = 0;
    for (i64 g = 0; g < groups; g++) {
      sw += pw[g * d + j];
      sb += pb[g * d + j];
    }
    if (dw) dw[j] = (T)sw;
    if (db) db[j] = (T)sb;
  }
}

#define NORM(N, T)                                                                                   \
  extern "C" __global__ void bn_stats_##N(St *part, const T *x, i64 m, i64 ch, i64 sp, i64 chunk, i64 groups) { \
    bn_stats<T>(part, x, m, ch, sp, chunk, groups);                                                  \
  }                                                                                                  \
  extern "C" __global__ void bn_finish_##N(double *stat, T *sm, T *sis, T *rm, T *rv, const St *part, i64 ch, \
                                           i64 groups, double eps, double momentum) {               \
    bn_finish<T>(stat, sm, sis, rm, rv, part, ch, groups, eps, momentum);                            \
  }                                                                                                  \
  extern "C" __global__ void bn_eval_stats_##N(double *stat, T *sm, T *sis, const T *rm, const T *rv, i64 ch, \
                                               double eps) {                                         \
    bn_eval_stats<T>(stat, sm, sis, rm, rv, ch, eps);                                                \
  }                                                                                                  \
  extern "C" __global__ void bn_apply_##N(T *y, const T *x, const double *stat, const T *w, const T *b, i64 total, \
                                          i64 ch, i64 sp) {                                          \
    bn_apply<T>(y, x, stat, w, b, total, ch, sp);                                                    \
  }                                                                                                  \
  extern "C" __global__ void bn_back_stats_##N(St *part, const T *dy, const T *x, const T *mean, i64 m, i64 ch, \
                                               i64 sp, i64 chunk, i64 groups) {                      \
    bn_back_stats<T>(part, dy, x, mean, m, ch, sp, chunk, groups);                                   \
  }                                                                                                  \
  extern "C" __global__ void bn_back_finish_##N(T *dw, T *db, double *coef, const St *part, const T *w, \
                                                const T *mean, const T *invstd, i64 ch, i64 groups, i64 m, \
                                                int training) {                                      \
    bn_back_finish<T>(dw, db, coef, part, w, mean, invstd, ch, groups, m, training);                 \
  }                                                                                                  \
  extern "C" __global__ void bn_back_dx_##N(T *dx, const T *dy, const T *x, const double *coef, i64 total, i64 ch, \
                                            i64 sp) {                                                \
    bn_back_dx<T>(dx, dy, x, coef, total, ch, sp);                                                   \
  }                                                                                                  \
  extern "C" __global__ void ln_fwd_##N(T *y, T *mean, T *rstd, const T *x, const T *w, const T *b, i64 d, \
                                        double eps) {                                                \
    ln_fwd<T>(y, mean, rstd, x, w, b, d, eps);                                                       \
  }                                                                                                  \
  extern "C" __global__ void ln_back_dx_##N(T *dx, const T *dy, const T *x, const T *w, const T *mean, \
                                            const T *rstd, i64 d) {                                  \
    ln_back_dx<T>(dx, dy, x, w, mean, rstd, d);                                                      \
  }                                                                                                  \
  extern "C" __global__ void ln_back_wb_##N(double *pw, double *pb, const T *dy, const T *x, const T *mean, \
                                            const T *rstd, i64 rows, i64 d, i64 chunk, i64 col_blocks) { \
    ln_back_wb<T>(pw, pb, dy, x, mean, rstd, rows, d, chunk, col_blocks);                            \
  }                                                                                                  \
  extern "C" __global__ void ln_back_wb_final_##N(T *dw, T *db, const double *pw, const double *pb, i64 groups, \
                                                  i64 d) {                                           \
    ln_back_wb_final<T>(dw, db, pw, pb, groups, d);                                                  \
  }
NORM(f32, float)
NORM(f64, double)
