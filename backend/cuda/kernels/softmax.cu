// Softmax, log-softmax and their backward along one axis of a contiguous
// tensor viewed as [outer, dim, inner]; cross-entropy from logits [N, C]
// with label smoothing and an ignored class. Sums accumulate in float64.
#include "common.cuh"

template <typename T> __device__ __forceinline__ T texp(T x);
template <> __device__ __forceinline__ float texp<float>(float x) { return expf(x); }
template <> __device__ __forceinline__ double texp<double>(double x) { return exp(x); }

// softmax_rows: inner == 1, one block per row of dim elements.
template <typename T> __device__ void softmax_rows(T *y, const T *x, i64 dim, int lg) {
  __shared__ double shm[32];
  const T *xr = x + blockIdx.x * dim;
  T *yr = y + blockIdx.x * dim;
  double m = neg_inf();
  for (i64 d = threadIdx.x; d < dim; d += blockDim.x) m = fmax_nan(m, (double)xr[d]);
  m = block_max(m, shm);
  double s = 0;
  for (i64 d = threadIdx.x; d < dim; d += blockDim.x) s += (double)texp<T>(xr[d] - (T)m);
  s = block_sum(s, shm);
  if (lg) {
    double ls = log(s);
    for (i64 d = threadIdx.x; d < dim; d += blockDim.x) yr[d] = (T)((double)xr[d] - m - ls);
  } else {
    for (i64 d = threadIdx.x; d < dim; d += blockDim.x) yr[d] = (T)((double)texp<T>(xr[d] - (T)m) / s);
  }
}

// softmax_cols: inner > 1, one thread per (outer, inner) line.
template <typename T> __device__ void softmax_cols(T *y, const T *x, i64 outer, i64 dim, i64 inner, int lg) {
  FOR_N(l, outer * inner) {
    i64 o = l / inner, i = l % inner;
    const T *xl = x + o * dim * inner + i;
    T *yl = y + o * dim * inner + i;
    double m = neg_inf();
    for (i64 d = 0; d < dim; d++) m = fmax_nan(m, (double)xl[d * inner]);
    double s = 0;
    for (i64 d = 0; d < dim; d++) s += (double)texp<T>(xl[d * inner] - (T)m);
    double ls = log(s);
    for (i64 d = 0; d < dim; d++) {
      double v = xl[d * inner];
      yl[d * inner] = lg ? (T)(v - m - ls) : (T)((double)texp<T>((T)v - (T)m) / s);
    }
  }
}

// Backward: softmax dx = y·(dy − Σ dy·y); log-softmax dx = dy − e^y·Σ dy.
template <typename T> __device__ void softmax_back_rows(T *dx, const T *y, const T *dy, i64 dim, int lg) {
  __shared__ double shm[32];
  i64 base = blockIdx.x * dim;
  double s = 0;
  for (i64 d = threadIdx.x; d < dim; d += blockDim.x)
    s += lg ? (double)dy[base + d] : (double)dy[base + d] * (double)y[base + d];
  s = block_sum(s, shm);
  for (i64 d = threadIdx.x; d < dim; d += blockDim.x) {
    double yv = y[base + d], g = dy[base + d];
    dx[base + d] = lg ? (T)(g - exp(yv) * s) : (T)(yv * (g - s));
  }
}

template <typename T>
__device__ void softmax_back_cols(T *dx, const T *y, const T *dy, i64 outer, i64 dim, i64 inner, int lg) {
  FOR_N(l, outer * inner) {
    i64 base = (l / inner) * dim * inner + l % inner;
    double s = 0;
    for (i64 d = 0; d < dim; d++) {
      i64 k = base + d * inner;
      s += lg ? (double)dy[k] : (double)dy[k] * (double)y[k];
    }
    for (i64 d = 0; d < dim; d++) {
      i64 k = base + d * inner;
      double yv = y[k], g = dy[k];
      dx[k] = lg ? (T)(g - exp(yv) * s) : (T)(yv * (g - s));
    }
  }
}

template <typename I> __device__ __forceinline__ i64 target_at(const I *t, i64 st, i64 n) { return (i64)t[n * st]; }

// Cross-entropy of row n (one block per row):
// loss = (1−ε)·(lse − x_t) + ε·(lse − mean_c x_c), 0 for an ignored row.
template <typename T, typename I>
__device__ void xent_rows(T *loss, const T *x, const I *target, i64 tst, i64 classes, double eps, i64 ignore, i64 *err) {
  __shared__ double shm[32];
  i64 n = blockIdx.x;
  i64 t = target_at(target, tst, n);
  if (t == ignore) {
    if (threadIdx.x == 0) loss[n] = 0;
    return;
  }
  if (t < 0 || t >= classes) {
    if (threadIdx.x == 0) {
      report_error(err, n);
      loss[n] = 0;
    }
    return;
  }
  const T *xr = x + n * classes;
  double m = neg_inf();
  for (i64 c = threadIdx.x; c < classes; c += blockDim.x) m = fmax_nan(m, (double)xr[c]);
  m = block_max(m, shm);
  double s = 0, sx = 0;
  for (i64 c = threadIdx.x; c < classes; c += blockDim.x) {
    double v = xr[c];
    s += exp(v - m);
    sx += v - m;
  }
  s = block_sum(s, shm);
  sx = block_sum(sx, shm);
  if (threadIdx.x == 0) {
    double ls = log(s);
    double nll = ls - ((double)xr[t] - m);
    double smooth = ls - sx / (double)classes;
    loss[n] = (T)((1 - eps) * nll + eps * smooth);
  }
}

// dx[n, c] = dloss[n]·(softmax_c − q_c), q = (1−ε)·onehot(t) + ε/C.
template <typename T, typename I>
__device__ void xent_back_rows(T *dx, const T *x, const I *target, i64 tst, const T *dloss, i64 dst_, i64 classes,
                               double eps, i64 ignore, i64 *err) {
  __shared__ double shm[32];
  i64 n = blockIdx.x;
  i64 t = target_at(target, tst, n);
  T *dr = dx + n * classes;
  bool bad = t != ignore && (t < 0 || t >= classes);
  if (t == ignore || bad) {
    if (bad && threadIdx.x == 0) report_error(err, n);
    for (i64 c = threadIdx.x; c < classes; c += blockDim.x) dr[c] = 0;
    return;
  }
  const T *xr = x + n * classes;
  double m = neg_inf();
  for (i64 c = threadIdx.x; c < classes; c += blockDim.x) m = fmax_nan(m, (double)xr[c]);
  m = block_max(m, shm);
  double s = 0;
  for (i64 c = threadIdx.x; c < classes; c += blockDim.x) s += exp((double)xr[c] - m);
  s = block_sum(s, shm);
  double g = dloss[n * dst_];
  double u = eps / (double)classes;
  for (i64 c = threadIdx.x; c < classes; c += blockDim.x) {
    double q = u + (c == t ? 1 - eps : 0);
    dr[c] = (T)(g * (exp((double)xr[c] - m) / s - q));
  }
}

#define SOFTMAX(N, T)                                                                                \
  extern "C" __global__ void softmax_rows_##N(T *y, const T *x, i64 dim, int lg) { softmax_rows<T>(y, x, dim, lg); } \
  extern "C" __global__ void softmax_cols_##N(T *y, const T *x, i64 outer, i64 dim, i64 inner, int lg) { \
    softmax_cols<T>(y, x, outer, dim, inner, lg);                                                    \
  }                                                                                                  \
  extern "C" __global__ void softmax_back_rows_##N(T *dx, const T *y, const T *dy, i64 dim, int lg) { \
    softmax_back_rows<T>(dx, y, dy, dim, lg);                                                        \
  }                                                                                                  \
  extern "C" __global__ void softmax_back_cols_##N(T *dx, const T *y, const T *dy, i64 outer, i64 dim, i64 inner, \
                                                   int lg) {                                         \
    softmax_back_cols<T>(dx, y, dy, outer, dim, inner, lg);                                          \
  }
SOFTMAX(f32, float)
SOFTMAX(f64, double)

#define XENT(N, T, IN, I)                                                                            \
  extern "C" __global__ void xent_##N##_##IN(T *loss, const T *x, const I *target, i64 tst, i64 classes, double eps, \
                                             i64 ignore, i64 *err) {                                 \
    xent_rows<T, I>(loss, x, target, tst, classes, eps, ignore, err);                                \
  }                                                                                                  \
  extern "C" __global__ void xent_back_##N##_##IN(T *dx, const T *x, const I *target, i64 tst, const T *dloss, \
                                                  i64 dst_, i64 classes, double eps, i64 ignore, i64 *err) { \
    xent_back_rows<T, I>(dx, x, target, tst, dloss, dst_, classes, eps, ignore, err);               \
  }
XENT(f32, float, i32, int)
XENT(f32, float, i64, i64)
XENT(f64, double, i32, int)
XENT(f64, double, i64, i64)
