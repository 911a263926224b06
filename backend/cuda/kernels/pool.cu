// 2-D max and average pooling (PyTorch's semantics, as the CPU backend) and
// the im2col/col2im transforms of the convolution fallback. Tensors are
// contiguous NCHW; a "plane" is one (n, c).
#include "common.cuh"

struct PoolGeom {
  i64 h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

// The geometry travels as a Dims (12 of its 8-byte slots used in two Dims).
__device__ __forceinline__ PoolGeom geom(const Dims &a, const Dims &b) {
  PoolGeom g;
  g.h = a.v[0];
  g.w = a.v[1];
  g.oh = a.v[2];
  g.ow = a.v[3];
  g.kh = a.v[4];
  g.kw = a.v[5];
  g.sh = a.v[6];
  g.sw = a.v[7];
  g.ph = b.v[0];
  g.pw = b.v[1];
  g.dh = b.v[2];
  g.dw = b.v[3];
  return g;
}

template <typename T> __device__ void pool_max(T *y, i64 *idx, const T *x, i64 total, const PoolGeom g) {
  FOR_N(o, total) {
    i64 pl = o / (g.oh * g.ow), r = o % (g.oh * g.ow), oh = r / g.ow, ow = r % g.ow;
    const T *in = x + pl * g.h * g.w;
    i64 h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    i64 h1 = h0 + (g.kh - 1) * g.dh + 1, w1 = w0 + (g.kw - 1) * g.dw + 1;
    if (h1 > g.h) h1 = g.h;
    if (w1 > g.w) w1 = g.w;
    while (h0 < 0) h0 += g.dh;
    while (w0 < 0) w0 += g.dw;
    T best = (T)neg_inf();
    i64 at = h0 * g.w + w0;
    for (i64 ih = h0; ih < h1; ih += g.dh)
      for (i64 iw = w0; iw < w1; iw += g.dw) {
        T v = in[ih * g.w + iw];
        if (v > best || v != v) {
          best = v;
          at = ih * g.w + iw;
        }
      }
    y[o] = best;
    idx[o] = at;
  }
}

// avg_window clips output (oh, ow)'s window and returns its divisor.
__device__ __forceinline__ i64 avg_window(const PoolGeom &g, i64 oh, i64 ow, int include, i64 &h0, i64 &h1, i64 &w0,
                                          i64 &w1) {
  h0 = oh * g.sh - g.ph;
  w0 = ow * g.sw - g.pw;
  h1 = h0 + g.kh < g.h + g.ph ? h0 + g.kh : g.h + g.ph;
  w1 = w0 + g.kw < g.w + g.pw ? w0 + g.kw : g.w + g.pw;
  i64 div = (h1 - h0) * (w1 - w0);
  if (h0 < 0) h0 = 0;
  if (w0 < 0) w0 = 0;
  if (h1 > g.h) h1 = g.h;
  if (w1 > g.w) w1 = g.w;
  if (!include) div = (h1 - h0) * (w1 - w0);
  return div;
}

template <typename T> __device__ void pool_avg(T *y, const T *x, i64 total, const PoolGeom g, int include) {
  FOR_N(o, total) {
    i64 pl = o / (g.oh * g.ow), r = o % (g.oh * g.ow), oh = r / g.ow, ow = r % g.ow;
    const T *in = x + pl * g.h * g.w;
    i64 h0, h1, w0, w1;
    i64 div = avg_window(g, oh, ow, include, h0, h1, w0, w1);
    if (h0 >= h1 || w0 >= w1) {
      y[o] = 0;
      continue;
    }
    T s = 0;
    for (i64 ih = h0; ih < h1; ih++)
      for (i64 iw = w0; iw < w1; iw++) s += in[ih * g.w + iw];
    y[o] = s / (T)div;
  }
}

// Max pooling backward: dx (zeroed by the host) receives each dy at its
// index; an index outside the plane is reported.
template <typename T> __device__ void pool_max_back(T *dx, const T *dy, const i64 *idx, i64 total, i64 hw, i64 ohw, i64 *err) {
  FOR_N(o, total) {
    i64 i = idx[o];
    if (i < 0 || i >= hw) {
      report_error(err, o);
      continue;
    }
    atomicAdd(dx + (o / ohw) * hw + i, dy[o]);
  }
}

// Average pooling backward, gathered per input element (deterministic):
// the outputs whose windows cover (ih, iw) each give dy/divisor.
template <typename T> __device__ void pool_avg_back(T *dx, const T *dy, i64 total, const PoolGeom g, int include) {
  FOR_N(k, total) {
    i64 pl = k / (g.h * g.w), r = k % (g.h * g.w), ih = r / g.w, iw = r % g.w;
    const T *out = dy + pl * g.oh * g.ow;
    i64 oh0 = ih + g.ph - g.kh + 1, ow0 = iw + g.pw - g.kw + 1;
    oh0 = oh0 <= 0 ? 0 : (oh0 + g.sh - 1) / g.sh;
    ow0 = ow0 <= 0 ? 0 : (ow0 + g.sw - 1) / g.sw;
    i64 oh1 = (ih + g.ph) / g.sh + 1, ow1 = (iw + g.pw) / g.sw + 1;
    if (oh1 > g.oh) oh1 = g.oh;
    if (ow1 > g.ow) ow1 = g.ow;
    T s = 0;
    for (i64 oh = oh0; oh < oh1; oh++)
      for (i64 ow = ow0; ow < ow1; ow++) {
        i64 h0, h1, w0, w1;
        i64 div = avg_window(g, oh, ow, include, h0, h1, w0, w1);
        if (ih >= h0 && ih < h1 && iw >= w0 && iw < w1) s += out[oh * g.ow + ow] / (T)div;
      }
    dx[k] = s;
  }
}

// im2col of nb images of c channels: col[n, (ci·kh + ki)·kw + kj, oy·ow + ox]
// = x[n, ci, oy·sh − ph + ki·dh, ox·sw − pw + kj·dw], 0 in the padding.
template <typename T> __device__ void im2col(T *col, const T *x, i64 nb, i64 c, const PoolGeom g) {
  i64 l = g.oh * g.ow, rows = c * g.kh * g.kw;
  FOR_N(k, nb * rows * l) {
    i64 n = k / (rows * l), rr = (k / l) % rows, p = k % l;
    i64 ci = rr / (g.kh * g.kw), ki = (rr / g.kw) % g.kh, kj = rr % g.kw;
    i64 ih = (p / g.ow) * g.sh - g.ph + ki * g.dh, iw = (p % g.ow) * g.sw - g.pw + kj * g.dw;
    T v = 0;
    if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) v = x[((n * c + ci) * g.h + ih) * g.w + iw];
    col[k] = v;
  }
}

// col2im, gathered per input element: the sum of the columns that read it.
template <typename T> __device__ void col2im(T *dx, const T *col, i64 nb, i64 c, const PoolGeom g) {
  i64 l = g.oh * g.ow, rows = c * g.kh * g.kw;
  FOR_N(k, nb * c * g.h * g.w) {
    i64 iw = k % g.w, ih = (k / g.w) % g.h, ci = (k / (g.w * g.h)) % c, n = k / (g.w * g.h * c);
    T s = 0;
    for (i64 ki = 0; ki < g.kh; ki++) {
      i64 t = ih + g.ph - ki * g.dh;
      if (t < 0 || t % g.sh != 0) continue;
      i64 oy = t / g.sh;
      if (oy >= g.oh) continue;
      for (i64 kj = 0; kj < g.kw; kj++) {
        i64 u = iw + g.pw - kj * g.dw;
        if (u < 0 || u % g.sw != 0) continue;
        i64 ox = u / g.sw;
        if (ox >= g.ow) continue;
        s += col[(n * rows + (ci * g.kh + ki) * g.kw + kj) * l + oy * g.ow + ox];
      }
    }
    dx[k] = s;
  }
}

#define POOL(N, T)                                                                                   \
  extern "C" __global__ void pool_max_##N(T *y, i64 *idx, const T *x, i64 total, Dims g0, Dims g1) {  \
    pool_max<T>(y, idx, x, total, geom(g0, g1));                                                     \
  }                                                                                                  \
  extern "C" __global__ void pool_avg_##N(T *y, const T *x, i64 total, Dims g0, Dims g1, int include) { \
    pool_avg<T>(y, x, total, geom(g0, g1), include);                                                 \
  }                                                                                                  \
  extern "C" __global__ void pool_max_back_##N(T *dx, const T *dy, const i64 *idx, i64 total, i64 hw, i64 ohw, \
                                               i64 *err) {                                           \
    pool_max_back<T>(dx, dy, idx, total, hw, ohw, err);                                              \
  }                                                                                                  \
  extern "C" __global__ void pool_avg_back_##N(T *dx, const T *dy, i64 total, Dims g0, Dims g1, int include) { \
    pool_avg_back<T>(dx, dy, total, geom(g0, g1), include);                                          \
  }                                                                                                  \
  extern "C" __global__ void im2col_##N(T *col, const T *x, i64 nb, i64 c, Dims g0, Dims g1) {        \
    im2col<T>(col, x, nb, c, geom(g0, g1));                                                          \
  }                                                                                                  \
  extern "C" __global__ void col2im_##N(T *dx, const T *col, i64 nb, i64 c, Dims g0, Dims g1) {       \
    col2im<T>(dx, col, nb, c, geom(g0, g1));                                                         \
  }
POOL(f32, float)
POOL(f64, double)
