// Gathers and scatters along one axis, for every element type and int32 or
// int64 indices. Gather and index_select read x at the indexed position of
// the axis; scatter_add and index_add give each line along the axis to one
// thread, which adds in order: no atomics, and results that do not depend
// on scheduling. An index outside [0, len) is reported through err.
#include "common.cuh"

// gather: dst[i] = x[base(i) + index[i]·xs], base from x's strides with the
// axis stride zeroed.
template <typename T, typename I>
__device__ void gather(T *dst, const T *x, const I *index, i64 n, i64 xs, i64 len, i64 *err, int nd, const Dims &shape,
                       const Dims &sd, const Dims &sx, const Dims &si) {
  Dims st[3] = {sd, sx, si};
  FOR_N(i, n) {
    i64 o[3];
    offsets<3>(i, nd, shape, st, o);
    i64 k = (i64)index[o[2]];
    if (k < 0 || k >= len) {
      report_error(err, i);
      continue;
    }
    dst[o[0]] = x[o[1] + k * xs];
  }
}

// scatter_add: for each line p (positions off the axis) and k along it,
// dst[base(p) + index[p, k]·ds] += src[p, k].
template <typename T, typename I>
__device__ void scatter_add(T *dst, const T *src, const I *index, i64 lines, i64 alen, i64 ds, i64 ss, i64 is, i64 len,
                            i64 *err, int nd, const Dims &shape, const Dims &sd, const Dims &sso, const Dims &sio) {
  Dims st[3] = {sd, sso, sio};
  FOR_N(p, lines) {
    i64 o[3];
    offsets<3>(p, nd, shape, st, o);
    for (i64 k = 0; k < alen; k++) {
      i64 t = (i64)index[o[2] + k * is];
      if (t < 0 || t >= len) {
        report_error(err, p * alen + k);
        continue;
      }
      dst[o[0] + t * ds] += src[o[1] + k * ss];
    }
  }
}

#define GATHER(N, T, IN, I)                                                                          \
  extern "C" __global__ void gather_##N##_##IN(T *dst, const T *x, const I *index, i64 n, i64 xs, i64 len, i64 *err, \
                                               int nd, Dims shape, Dims sd, Dims sx, Dims si) {      \
    gather<T, I>(dst, x, index, n, xs, len, err, nd, shape, sd, sx, si);                             \
  }
#define GATHER_T(N, T) GATHER(N, T, i32, int) GATHER(N, T, i64, i64)
GATHER_T(f32, float)
GATHER_T(f64, double)
GATHER_T(f16, f16)
GATHER_T(bf16, bf16)
GATHER_T(i32, int)
GATHER_T(i64, i64)
GATHER_T(u8, unsigned char)
GATHER_T(b8, b8)

#define SCATTER(N, T, IN, I)                                                                         \
  extern "C" __global__ void scatter_add_##N##_##IN(T *dst, const T *src, const I *index, i64 lines, i64 alen, i64 ds, \
                                                    i64 ss, i64 is, i64 len, i64 *err, int nd, Dims shape, Dims sd, \
                                                    Dims sso, Dims sio) {                            \
    scatter_add<T, I>(dst, src, index, lines, alen, ds, ss, is, len, err, nd, shape, sd, sso, sio);  \
  }
#define SCATTER_T(N, T) SCATTER(N, T, i32, int) SCATTER(N, T, i64, i64)
SCATTER_T(f32, float)
SCATTER_T(f64, double)
SCATTER_T(i32, int)
SCATTER_T(i64, i64)

// index_check reports the first position (row-major) of index whose value
// lies outside [0, len); the host runs it before a gather or scatter, so
// that a bad index leaves every operand untouched.
#define CHECK(IN, I)                                                                                 \
  extern "C" __global__ void index_check_##IN(const I *index, i64 n, i64 len, i64 *err, int nd, Dims shape, Dims st) { \
    FOR_N(i, n) {                                                                                    \
      i64 o;                                                                                         \
      offsets<1>(i, nd, shape, &st, &o);                                                             \
      i64 k = (i64)index[o];                                                                         \
      if (k < 0 || k >= len) report_error(err, i);                                                   \
    }                                                                                                \
  }
CHECK(i32, int)
CHECK(i64, i64)
