// Fused optimizer updates over contiguous float32 (or float64) parameters,
// one thread per element, with PyTorch's formulas.
#include "common.cuh"

// SGD with momentum μ, dampening τ, weight decay λ and Nesterov:
//   g ← g + λ·p;  b ← μ·b + (1−τ)·g (b ← g on the first step);
//   g ← g + μ·b (Nesterov) or g ← b;  p ← p − lr·g.
template <typename T>
__device__ void sgd(T *p, const T *g, T *buf, i64 n, double lr, double mu, double damp, double wd, int nesterov, int first) {
  FOR_N(i, n) {
    double gi = g[i], pi = p[i];
    if (wd != 0) gi += wd * pi;
    if (mu != 0) {
      double bi = first ? gi : mu * (double)buf[i] + (1 - damp) * gi;
      buf[i] = (T)bi;
      gi = nesterov ? gi + mu * bi : bi;
    }
    p[i] = (T)(pi - lr * gi);
  }
}

// AdamW (decoupled weight decay), step t ≥ 1:
//   p ← p·(1 − lr·λ);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//   p ← p − lr·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε).
template <typename T>
__device__ void adamw(T *p, const T *g, T *m, T *v, i64 n, double lr, double b1, double b2, double eps, double wd,
                      double bc1, double bc2) {
  FOR_N(i, n) {
    double gi = g[i], pi = (double)p[i] * (1 - lr * wd);
    double mi = b1 * (double)m[i] + (1 - b1) * gi;
    double vi = b2 * (double)v[i] + (1 - b2) * gi * gi;
    m[i] = (T)mi;
    v[i] = (T)vi;
    p[i] = (T)(pi - lr * (mi / bc1) / (sqrt(vi / bc2) + eps));
  }
}

extern "C" __global__ void sgd_f32(float *p, const float *g, float *buf, i64 n, double lr, double mu, double damp,
                                   double wd, int nesterov, int first) {
  sgd<float>(p, g, buf, n, lr, mu, damp, wd, nesterov, first);
}
extern "C" __global__ void sgd_f64(double *p, const double *g, double *buf, i64 n, double lr, double mu, double damp,
                                   double wd, int nesterov, int first) {
  sgd<double>(p, g, buf, n, lr, mu, damp, wd, nesterov, first);
}
extern "C" __global__ void adamw_f32(float *p, const float *g, float *m, float *v, i64 n, double lr, double b1,
                                     double b2, double eps, double wd, double bc1, double bc2) {
  adamw<float>(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
}
extern "C" __global__ void adamw_f64(double *p, const double *g, double *m, double *v, i64 n, double lr, double b1,
                                     double b2, double eps, double wd, double bc1, double bc2) {
  adamw<double>(p, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
}
