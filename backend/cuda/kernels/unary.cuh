// The float and double arithmetic of the unary operations, apart from
// elementwise.cu so that the host tests compile it as C++ and check it
// against the CPU backend's formulas (unary_host_test.go).
//
// GELU is x·Φ(x) with Φ(x) = erfc(−x/√2)/2, not (1 + erf(x/√2))/2, whose
// sum cancels for x ≪ 0 (in float32 it is 0 below x ≈ −5.3 and has lost
// most of its digits from x ≈ −3). The tanh approximation
// x·(1 + tanh u)/2, u = √(2/π)·(x + 0.044715·x³), is written x/(1 + e^{−2u})
// in float32 for the same reason; in float64 it keeps the CPU backend's
// form.
#pragma once

// Unary operations, numbered as backend.UnaryOp.
enum {
  U_NEG, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_TANH, U_SIGMOID, U_RELU, U_GELU, U_GELU_TANH,
  U_ABS, U_SIGN, U_ERF, U_RECIP, U_SQUARE, U_POW, U_ADD, U_MUL
};

__device__ __forceinline__ float unary_f(int op, float x, float arg, double darg) {
  switch (op) {
  case U_NEG: return -x;
  case U_EXP: return expf(x);
  case U_LOG: return logf(x);
  case U_SQRT: return sqrtf(x);
  case U_RSQRT: return 1.0f / sqrtf(x);
  case U_TANH: return tanhf(x);
  case U_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case U_RELU: return x < 0.0f ? 0.0f : x;
  case U_GELU: return 0.5f * x * erfcf(-0.70710678118654752f * x);
  case U_GELU_TANH: return x / (1.0f + expf(-1.5957691216057307f * (x + 0.044715f * x * x * x)));
  case U_ABS: return fabsf(x);
  case U_SIGN: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
  case U_ERF: return erff(x);
  case U_RECIP: return 1.0f / x;
  case U_SQUARE: return x * x;
  case U_POW: return darg == 1.0 ? x : (darg == 2.0 ? x * x : (float)pow((double)x, darg));
  case U_ADD: return x + arg;
  case U_MUL: return x * arg;
  }
  return x;
}
__device__ __forceinline__ double unary_d(int op, double x, double arg) {
  switch (op) {
  case U_NEG: return -x;
  case U_EXP: return exp(x);
  case U_LOG: return log(x);
  case U_SQRT: return sqrt(x);
  case U_RSQRT: return 1.0 / sqrt(x);
  case U_TANH: return tanh(x);
  case U_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case U_RELU: return x < 0.0 ? 0.0 : x;
  case U_GELU: return 0.5 * x * erfc(-0.70710678118654752440 * x);
  case U_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  case U_ABS: return fabs(x);
  case U_SIGN: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
  case U_ERF: return erf(x);
  case U_RECIP: return 1.0 / x;
  case U_SQUARE: return x * x;
  case U_POW: return arg == 1.0 ? x : (arg == 2.0 ? x * x : pow(x, arg));
  case U_ADD: return x + arg;
  case U_MUL: return x * arg;
  }
  return x;
}

// The gradients of the activations (backend.ReLUGrad … SigmoidGrad, from
// G_RELU on), from the output gradient g and the saved tensor s, in double
// for float and double alike, with the CPU backend's formulas:
//   ReLU g·[s > 0];  GELU g·(Φ(s) + s·φ(s)), Φ(s) = erfc(−s/√2)/2;
//   GELUTanh g·((1 + t)/2 + s·(1 − t²)·√(2/π)·(1 + 3c·s²)/2),
//   t = tanh(√(2/π)·(s + c·s³)), c = 0.044715;
//   Tanh g·(1 − s²) (s the output);  Sigmoid g·s·(1 − s) (s the output).
enum { G_RELU, G_GELU, G_GELU_TANH, G_TANH, G_SIGMOID };

__device__ __forceinline__ double activation_grad(int op, double g, double s) {
  switch (op) {
  case G_RELU: return s > 0.0 ? g : 0.0;
  case G_GELU: {
    double cdf = 0.5 * erfc(-s * 0.70710678118654752440);
    double pdf = 0.39894228040143267794 * exp(-0.5 * s * s);
    return g * (cdf + s * pdf);
  }
  case G_GELU_TANH: {
    double t = tanh(0.79788456080286535588 * (s + 0.044715 * s * s * s));
    return g * (0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * s * s));
  }
  case G_TANH: return g * (1.0 - s * s);
  case G_SIGMOID: return g * s * (1.0 - s);
  }
  return g;
}
