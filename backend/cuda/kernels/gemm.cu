// A batched matrix product for when cuBLAS is absent: C = α·A·B + β·C with
// A m×k, B k×n and C m×n given by row and column strides (a transpose is a
// swap of strides), one batch stride each. 16×16 tiles in shared memory;
// each block computes one tile of one product. With β = 0, C's prior
// contents are not read.
#include "common.cuh"

#define TILE 16

template <typename T>
__device__ void gemm(T *c, const T *a, const T *b, i64 m, i64 n, i64 k, i64 ars, i64 acs, i64 brs, i64 bcs, i64 crs,
                     i64 abs_, i64 bbs, i64 cbs, double alpha, double beta) {
  __shared__ T ta[TILE][TILE + 1];
  __shared__ T tb[TILE][TILE + 1];
  i64 tiles_n = (n + TILE - 1) / TILE, tiles_m = (m + TILE - 1) / TILE;
  i64 blk = blockIdx.x;
  i64 bt = blk / (tiles_m * tiles_n), tm = (blk / tiles_n) % tiles_m, tn = blk % tiles_n;
  int ty = threadIdx.x / TILE, tx = threadIdx.x % TILE;
  i64 row = tm * TILE + ty, col = tn * TILE + tx;
  const T *ab = a + bt * abs_;
  const T *bb = b + bt * bbs;
  T acc = 0;
  for (i64 k0 = 0; k0 < k; k0 += TILE) {
    i64 ka = k0 + tx, kb = k0 + ty;
    ta[ty][tx] = (row < m && ka < k) ? ab[row * ars + ka * acs] : (T)0;
    tb[ty][tx] = (kb < k && col < n) ? bb[kb * brs + col * bcs] : (T)0;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < TILE; q++) acc += ta[ty][q] * tb[q][tx];
    __syncthreads();
  }
  if (row < m && col < n) {
    T *cp = c + bt * cbs + row * crs + col;
    T r = (T)alpha * acc;
    if (beta != 0) r += (T)beta * *cp;
    *cp = r;
  }
}

extern "C" __global__ void gemm_f32(float *c, const float *a, const float *b, i64 m, i64 n, i64 k, i64 ars, i64 acs,
                                    i64 brs, i64 bcs, i64 crs, i64 abs_, i64 bbs, i64 cbs, double alpha, double beta) {
  gemm<float>(c, a, b, m, n, k, ars, acs, brs, bcs, crs, abs_, bbs, cbs, alpha, beta);
}
extern "C" __global__ void gemm_f64(double *c, const double *a, const double *b, i64 m, i64 n, i64 k, i64 ars, i64 acs,
                                    i64 brs, i64 bcs, i64 crs, i64 abs_, i64 bbs, i64 cbs, double alpha, double beta) {
  gemm<double>(c, a, b, m, n, k, ars, acs, brs, bcs, crs, abs_, bbs, cbs, alpha, beta);
}
