// Elementwise kernels over strided views: copy with conversion, fill,
// unary and binary maps, where. Shapes arrive coalesced by the host (axes of
// extent 1 dropped, adjacent axes contiguous in every operand merged), so
// contiguous work is a single axis. Pointers address each view's first
// element.
#include "common.cuh"
#include "unary.cuh"

template <typename D, typename S>
__device__ void copy_impl(D *dst, const S *src, i64 n, int nd, Dims shape, Dims sd, Dims ss) {
  Dims st[2] = {sd, ss};
  FOR_N(i, n) {
    i64 o[2];
    offsets<2>(i, nd, shape, st, o);
    dst[o[0]] = cvt<D>(src[o[1]]);
  }
}

#define COPY(DN, D, SN, S)                                                                           \
  extern "C" __global__ void copy_##DN##_##SN(D *dst, const S *src, i64 n, int nd, Dims shape, Dims sd, \
                                              Dims ss) {                                             \
    copy_impl<D, S>(dst, src, n, nd, shape, sd, ss);                                                 \
  }
#define COPY_FROM(DN, D)                                                                             \
  COPY(DN, D, f32, float)                                                                            \
  COPY(DN, D, f64, double)                                                                           \
  COPY(DN, D, f16, f16)                                                                              \
  COPY(DN, D, bf16, bf16)                                                                            \
  COPY(DN, D, i32, int)                                                                              \
  COPY(DN, D, i64, i64)                                                                              \
  COPY(DN, D, u8, unsigned char)                                                                     \
  COPY(DN, D, b8, b8)
COPY_FROM(f32, float)
COPY_FROM(f64, double)
COPY_FROM(f16, f16)
COPY_FROM(bf16, bf16)
COPY_FROM(i32, int)
COPY_FROM(i64, i64)
COPY_FROM(u8, unsigned char)
COPY_FROM(b8, b8)

// fill_T sets every element to v, given as the element's bit pattern.
template <typename T> __device__ void fill_impl(T *dst, T v, i64 n, int nd, Dims shape, Dims sd) {
  FOR_N(i, n) {
    i64 o;
    offsets<1>(i, nd, shape, &sd, &o);
    dst[o] = v;
  }
}
// from_bits reinterprets the low bytes of a 64-bit pattern as a T.
template <typename T> __device__ T from_bits(u64 b);
template <> __device__ float from_bits<float>(u64 b) { return __int_as_float((int)(u32)b); }
template <> __device__ double from_bits<double>(u64 b) { return __longlong_as_double((i64)b); }
template <> __device__ f16 from_bits<f16>(u64 b) { f16 h; h.x = (unsigned short)b; return h; }
template <> __device__ bf16 from_bits<bf16>(u64 b) { bf16 h; h.x = (unsigned short)b; return h; }
template <> __device__ int from_bits<int>(u64 b) { return (int)(u32)b; }
template <> __device__ i64 from_bits<i64>(u64 b) { return (i64)b; }
template <> __device__ unsigned char from_bits<unsigned char>(u64 b) { return (unsigned char)b; }
template <> __device__ b8 from_bits<b8>(u64 b) { b8 h; h.x = (unsigned char)b; return h; }

#define FILL(N, T)                                                                                   \
  extern "C" __global__ void fill_##N(T *dst, u64 bits, i64 n, int nd, Dims shape, Dims sd) {          \
    fill_impl<T>(dst, from_bits<T>(bits), n, nd, shape, sd);                                         \
  }
FILL(f32, float)
FILL(f64, double)
FILL(f16, f16)
FILL(bf16, bf16)
FILL(i32, int)
FILL(i64, i64)
FILL(u8, unsigned char)
FILL(b8, b8)

template <typename T> __device__ __forceinline__ T unary_i(int op, T x) {
  switch (op) {
  case U_NEG: return -x;
  case U_ABS: return x < 0 ? -x : x;
  case U_SIGN: return x > 0 ? 1 : (x < 0 ? -1 : 0);
  case U_SQUARE: return x * x;
  case U_RELU: return x < 0 ? 0 : x;
  }
  return x;
}

extern "C" __global__ void unary_f32(float *dst, const float *x, int op, double arg, i64 n, int nd, Dims shape,
                                     Dims sd, Dims sx) {
  Dims st[2] = {sd, sx};
  float farg = (float)arg;
  if (nd == 1 && sd.v[0] == 1 && sx.v[0] == 1) {
    FOR_N(i, n) dst[i] = unary_f(op, x[i], farg, arg);
    return;
  }
  FOR_N(i, n) {
    i64 o[2];
    offsets<2>(i, nd, shape, st, o);
    dst[o[0]] = unary_f(op, x[o[1]], farg, arg);
  }
}
extern "C" __global__ void unary_f64(double *dst, const double *x, int op, double arg, i64 n, int nd, Dims shape,
                                     Dims sd, Dims sx) {
  Dims st[2] = {sd, sx};
  FOR_N(i, n) {
    i64 o[2];
    offsets<2>(i, nd, shape, st, o);
    dst[o[0]] = unary_d(op, x[o[1]], arg);
  }
}
#define UNARY_INT(N, T)                                                                              \
  extern "C" __global__ void unary_##N(T *dst, const T *x, int op, double arg, i64 n, int nd, Dims shape, \
                                       Dims sd, Dims sx) {                                           \
    Dims st[2] = {sd, sx};                                                                           \
    FOR_N(i, n) {                                                                                    \
      i64 o[2];                                                                                      \
      offsets<2>(i, nd, shape, st, o);                                                               \
      dst[o[0]] = unary_i<T>(op, x[o[1]]);                                                           \
    }                                                                                                \
  }
UNARY_INT(i32, int)
UNARY_INT(i64, i64)

// Binary operations, numbered as backend.BinaryOp.
enum { B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_POW, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_RELU_GRAD };

template <typename T> __device__ __forceinline__ T binary_f(int op, T a, T b) {
  switch (op) {
  case B_ADD: return a + b;
  case B_SUB: return a - b;
  case B_MUL: return a * b;
  case B_DIV: return a / b;
  case B_MAX: return (a != a || a > b) ? a : b;
  case B_MIN: return (a != a || a < b) ? a : b;
  case B_POW: return (T)pow((double)a, (double)b);
  case B_RELU_GRAD: return b > (T)0 ? a : (T)0;
  }
  // The other activation gradients (unary.cuh).
  if (op > B_RELU_GRAD) return (T)activation_grad(op - B_RELU_GRAD, (double)a, (double)b);
  return a;
}
template <typename T> __device__ __forceinline__ T binary_i(int op, T a, T b) {
  switch (op) {
  case B_ADD: return a + b;
  case B_SUB: return a - b;
  case B_MUL: return a * b;
  case B_MAX: return a > b ? a : b;
  case B_MIN: return a < b ? a : b;
  }
  return a;
}
template <typename T> __device__ __forceinline__ unsigned char compare(int op, T a, T b) {
  switch (op) {
  case B_EQ: return a == b;
  case B_NE: return a != b;
  case B_LT: return a < b;
  case B_LE: return a <= b;
  case B_GT: return a > b;
  case B_GE: return a >= b;
  }
  return 0;
}

#define BINARY(N, T, F)                                                                              \
  extern "C" __global__ void binary_##N(T *dst, const T *a, const T *b, int op, i64 n, int nd, Dims shape, \
                                        Dims sd, Dims sa, Dims sb) {                                 \
    if (nd == 1 && sd.v[0] == 1 && sa.v[0] == 1 && sb.v[0] == 1) {                                   \
      FOR_N(i, n) dst[i] = F<T>(op, a[i], b[i]);                                                     \
      return;                                                                                        \
    }                                                                                                \
    Dims st[3] = {sd, sa, sb};                                                                       \
    FOR_N(i, n) {                                                                                    \
      i64 o[3];                                                                                      \
      offsets<3>(i, nd, shape, st, o);                                                               \
      dst[o[0]] = F<T>(op, a[o[1]], b[o[2]]);                                                        \
    }                                                                                                \
  }                                                                                                  \
  extern "C" __global__ void compare_##N(unsigned char *dst, const T *a, const T *b, int op, i64 n, int nd, \
                                         Dims shape, Dims sd, Dims sa, Dims sb) {                    \
    Dims st[3] = {sd, sa, sb};                                                                       \
    FOR_N(i, n) {                                                                                    \
      i64 o[3];                                                                                      \
      offsets<3>(i, nd, shape, st, o);                                                               \
      dst[o[0]] = compare<T>(op, a[o[1]], b[o[2]]);                                                  \
    }                                                                                                \
  }
BINARY(f32, float, binary_f)
BINARY(f64, double, binary_f)
BINARY(i32, int, binary_i)
BINARY(i64, i64, binary_i)

// where_T: dst = cond ? a : b.
#define WHERE(N, T)                                                                                  \
  extern "C" __global__ void where_##N(T *dst, const unsigned char *cond, const T *a, const T *b, i64 n, int nd, \
                                       Dims shape, Dims sd, Dims sc, Dims sa, Dims sb) {             \
    Dims st[4] = {sd, sc, sa, sb};                                                                   \
    FOR_N(i, n) {                                                                                    \
      i64 o[4];                                                                                      \
      offsets<4>(i, nd, shape, st, o);                                                               \
      dst[o[0]] = cond[o[1]] ? a[o[2]] : b[o[3]];                                                    \
    }                                                                                                \
  }
WHERE(f32, float)
WHERE(f64, double)
WHERE(f16, f16)
WHERE(bf16, bf16)
WHERE(i32, int)
WHERE(i64, i64)
WHERE(u8, unsigned char)
WHERE(b8, b8)
