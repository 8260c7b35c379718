#include "kernels/activations.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "kernels/fast_exp.h"
#include "kernels/fused_activation.h"
#include "kernels/parallel.h"
#include "kernels/wide_vectors.h"

namespace cohort {
namespace {

// exp, erf and tanh: libm's in double; in float, branch-free rational and
// polynomial forms (Cephes' expf, Eigen's erf and tanh; each within 4e-7
// relative of the exact function) so that the loops vectorise: glibc's
// expf/erff/tanhf are scalar calls, 10-30x slower per element than the
// arithmetic around them. worker/layers/new_layers_test checks every float
// activation and derivative against the double one over [-100, 100].
double Exp(double x) { return std::exp(x); }
double Erf(double x) { return std::erf(x); }
double Tanh(double x) { return std::tanh(x); }

// a clamped to [lo, hi] by value: std::min and std::max return references,
// which keeps GCC from if-converting the loops. The helpers are forced
// inline for the same reason: a call leaves a loop scalar.
inline __attribute__((always_inline)) float Clamp(float a, float lo, float hi) {
  const float x = a > lo ? a : lo;
  return x < hi ? x : hi;
}

// Cephes' expf (kernels/fast_exp.h), branch-free so that loops vectorise.
inline __attribute__((always_inline)) float Exp(float a) { return FastExp(a); }

// Eigen's float erf: an odd/even rational function on [-4, 4], outside
// which erf is +-1 in float.
inline __attribute__((always_inline)) float Erf(float a) {
  const float x = Clamp(a, -4.0f, 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return x * p / q;
}

// Eigen's float tanh: a rational function on [-7.9, 7.9] (+-1 beyond), the
// identity below 4e-4 where tanh(x) rounds to x.
inline __attribute__((always_inline)) float Tanh(float a) {
  const float x =
      std::min(std::max(a, -7.90531110763549805f), 7.90531110763549805f);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return (a < 0.0004f && a > -0.0004f) ? a : x * p / q;
}

// sqrt(2 / pi), 1 / sqrt(2) and 1 / sqrt(2 pi), in double; float rounds
// them once.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluCubic = 0.044715;

template <typename T>
inline __attribute__((always_inline)) T Sigmoid(T x) {
  return T(1) / (T(1) + Exp(-x));
}

// min(max(x, 0), 6), by value (see Clamp): the fused activation's.
template <typename T>
inline __attribute__((always_inline)) T Relu6(T a) {
  return Activate<FusedActivation::kRelu6>(a);
}

// x * sigmoid(x) as two loops over blocks that stay in L1: the sigmoids,
// then the products (in and out may be the same array). Written as one loop,
// GCC split it on FastExp's clamp and computed the clamped arm's product, x
// times the denormal sigmoid(-88), for every vector before blending it away;
// each such product took a microcode assist, and SiLU ran at a tenth of the
// speed of sigmoid. The bits are the one loop's.
template <typename T, typename Load>
inline __attribute__((always_inline)) void SiluForward(const Load& in, T* out,
                                                       int64_t n) {
  constexpr int64_t kBlock = 512;
  T s[kBlock];  // out may be in
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    for (int64_t i = 0; i < m; ++i) s[i] = Sigmoid(in(b + i));
    for (int64_t i = 0; i < m; ++i) out[b + i] = in(b + i) * s[i];
  }
}

// The forward pass over one range, on the calling thread; inlined into
// the float entry points below.
template <typename T, typename Load>
inline __attribute__((always_inline)) void ForwardRange(ActivationKind kind,
                                                        T slope, const Load& in,
                                                        T* out, int64_t n) {
  switch (kind) {
    case ActivationKind::kGelu:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        out[i] = T(0.5) * x * (T(1) + Erf(x * T(kInvSqrt2)));
      }
      return;
    case ActivationKind::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
        out[i] = T(0.5) * x * (T(1) + Tanh(u));
      }
      return;
    case ActivationKind::kSilu:
      SiluForward(in, out, n);
      return;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) out[i] = Tanh(in(i));
      return;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) out[i] = Sigmoid(in(i));
      return;
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        out[i] = x > T(0) ? x : slope * x;
      }
      return;
    case ActivationKind::kRelu6:
      for (int64_t i = 0; i < n; ++i) out[i] = Relu6(in(i));
      return;
    case ActivationKind::kHardsigmoid:
      for (int64_t i = 0; i < n; ++i) out[i] = Relu6(in(i) + T(3)) / T(6);
      return;
    case ActivationKind::kHardswish:
      for (int64_t i = 0; i < n; ++i) {
        out[i] = in(i)*Relu6(in(i) + T(3)) / T(6);
      }
      return;
  }
}

// The backward pass over one range, on the calling thread; inlined as
// ForwardRange.
template <typename T, typename Load>
inline __attribute__((always_inline)) void BackwardRange(
    ActivationKind kind, T slope, const Load& in, const T* grad_out, T* grad_in,
    int64_t n) {
  switch (kind) {
    case ActivationKind::kGelu:
      // d/dx x Phi(x) = Phi(x) + x phi(x).
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        const T cdf = T(0.5) * (T(1) + Erf(x * T(kInvSqrt2)));
        const T pdf = T(kInvSqrt2Pi) * Exp(T(-0.5) * x * x);
        grad_in[i] = grad_out[i] * (cdf + x * pdf);
      }
      return;
    case ActivationKind::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
        const T t = Tanh(u);
        const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
        grad_in[i] = grad_out[i] *
                     (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
      }
      return;
    case ActivationKind::kSilu:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        const T s = Sigmoid(x);
        grad_in[i] = grad_out[i] * (s * (T(1) + x * (T(1) - s)));
      }
      return;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) {
        const T t = Tanh(in(i));
        grad_in[i] = grad_out[i] * (T(1) - t * t);
      }
      return;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) {
        const T s = Sigmoid(in(i));
        grad_in[i] = grad_out[i] * (s * (T(1) - s));
      }
      return;
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) {
        grad_in[i] = in(i) > T(0) ? grad_out[i] : slope * grad_out[i];
      }
      return;
    // PyTorch's subgradients: zero at the kinks of relu6 and hardsigmoid,
    // and hardswish's middle piece closed at both ends.
    case ActivationKind::kRelu6:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        grad_in[i] = x > T(0) && x < T(6) ? grad_out[i] : T(0);
      }
      return;
    case ActivationKind::kHardsigmoid:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        grad_in[i] = x > T(-3) && x < T(3) ? grad_out[i] / T(6) : T(0);
      }
      return;
    case ActivationKind::kHardswish:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in(i);
        const T d = x < T(-3) ? T(0) : x <= T(3) ? x / T(3) + T(0.5) : T(1);
        grad_in[i] = grad_out[i] * d;
      }
      return;
  }
}

// The input of a range: in[i], or in[i] + bias with the sum rounded first
// (a product's per-row bias, added in the activation's own pass).
template <typename T>
struct Plain {
  const T* in;
  T operator()(int64_t i) const { return in[i]; }
};
template <typename T>
struct Biased {
  const T* in;
  T bias;
  T operator()(int64_t i) const { return in[i] + bias; }
};

// The float passes with AVX-512 where the machine has it: GELU's erf and
// exponential are some forty operations an element, and the loops run
// from cache (wide_vectors.h). Double stays on libm, one version. A zero
// bias is not the same as none: -0 + 0 is +0.
COHORT_WIDE_VECTORS void FloatForwardRange(ActivationKind kind, float slope,
                                           const float* in, const float* bias,
                                           float* out, int64_t n) {
  if (bias == nullptr) {
    ForwardRange(kind, slope, Plain<float>{in}, out, n);
  } else {
    ForwardRange(kind, slope, Biased<float>{in, *bias}, out, n);
  }
}

COHORT_WIDE_VECTORS void FloatBackwardRange(ActivationKind kind, float slope,
                                            const float* in, const float* bias,
                                            const float* grad_out,
                                            float* grad_in, int64_t n) {
  if (bias == nullptr) {
    BackwardRange(kind, slope, Plain<float>{in}, grad_out, grad_in, n);
  } else {
    BackwardRange(kind, slope, Biased<float>{in, *bias}, grad_out, grad_in, n);
  }
}

// One range of the forward pass; `bias` is null or points at the range's
// one bias value.
template <typename T>
void Forward(ActivationKind kind, T slope, const T* in, const T* bias, T* out,
             int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    FloatForwardRange(kind, slope, in, bias, out, n);
  } else if (bias == nullptr) {
    ForwardRange(kind, slope, Plain<T>{in}, out, n);
  } else {
    ForwardRange(kind, slope, Biased<T>{in, *bias}, out, n);
  }
}

template <typename T>
void Backward(ActivationKind kind, T slope, const T* in, const T* bias,
              const T* grad_out, T* grad_in, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    FloatBackwardRange(kind, slope, in, bias, grad_out, grad_in, n);
  } else if (bias == nullptr) {
    BackwardRange(kind, slope, Plain<T>{in}, grad_out, grad_in, n);
  } else {
    BackwardRange(kind, slope, Biased<T>{in, *bias}, grad_out, grad_in, n);
  }
}

}  // namespace

// Elementwise, so ranges on the compute threads give the bits of one
// thread (kernels/parallel.h).
template <typename T>
void ActivationForward(ActivationKind kind, T slope, const T* in, T* out,
                       int64_t n) {
  ParallelRanges(n, kElementwiseGrain, [&](int64_t a, int64_t b) {
    Forward<T>(kind, slope, in + a, nullptr, out + a, b - a);
  });
}

template <typename T>
void ActivationBackward(ActivationKind kind, T slope, const T* in,
                        const T* grad_out, T* grad_in, int64_t n) {
  ParallelRanges(n, kElementwiseGrain, [&](int64_t a, int64_t b) {
    Backward<T>(kind, slope, in + a, nullptr, grad_out + a, grad_in + a, b - a);
  });
}

template <typename T>
void ActivationForwardRowBias(ActivationKind kind, T slope, const T* in,
                              const T* bias, int64_t rows, int64_t cols,
                              T* out) {
  ParallelItems(rows, ItemGrain(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t o = r * cols;
      Forward<T>(kind, slope, in + o, bias + r, out + o, cols);
    }
  });
}

template <typename T>
void ActivationBackwardRowBias(ActivationKind kind, T slope, const T* in,
                               const T* bias, int64_t rows, int64_t cols,
                               const T* grad_out, T* grad_in) {
  ParallelItems(rows, ItemGrain(cols), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t o = r * cols;
      Backward<T>(kind, slope, in + o, bias + r, grad_out + o, grad_in + o,
                  cols);
    }
  });
}

#define COHORT_INSTANTIATE_ROW_BIAS(T)                                       \
  template void ActivationForwardRowBias<T>(ActivationKind, T, const T*,     \
                                            const T*, int64_t, int64_t, T*); \
  template void ActivationBackwardRowBias<T>(                                \
      ActivationKind, T, const T*, const T*, int64_t, int64_t, const T*, T*);
COHORT_INSTANTIATE_ROW_BIAS(float)
COHORT_INSTANTIATE_ROW_BIAS(double)
#undef COHORT_INSTANTIATE_ROW_BIAS

template void ActivationForward<float>(ActivationKind, float, const float*,
                                       float*, int64_t);
template void ActivationForward<double>(ActivationKind, double, const double*,
                                        double*, int64_t);
template void ActivationBackward<float>(ActivationKind, float, const float*,
                                        const float*, float*, int64_t);
template void ActivationBackward<double>(ActivationKind, double, const double*,
                                         const double*, double*, int64_t);

std::string ActivationName(ActivationKind kind, double slope) {
  switch (kind) {
    case ActivationKind::kGelu:
      return "gelu";
    case ActivationKind::kGeluTanh:
      return "gelu(tanh)";
    case ActivationKind::kSilu:
      return "silu";
    case ActivationKind::kTanh:
      return "tanh";
    case ActivationKind::kSigmoid:
      return "sigmoid";
    case ActivationKind::kLeakyRelu: {
      char text[32];
      std::snprintf(text, sizeof(text), "leaky_relu(%g)", slope);
      return text;
    }
    case ActivationKind::kRelu6:
      return "relu6";
    case ActivationKind::kHardsigmoid:
      return "hardsigmoid";
    case ActivationKind::kHardswish:
      return "hardswish";
  }
  return "activation";
}

}  // namespace cohort
