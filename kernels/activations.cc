#include "kernels/activations.h"

#include <cmath>

namespace cohort {
namespace {

// sqrt(2 / pi), 1 / sqrt(2) and 1 / sqrt(2 pi), in double; float rounds
// them once.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluCubic = 0.044715;

template <typename T>
T Sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

}  // namespace

template <typename T>
void ActivationForward(ActivationKind kind, T slope, const T* in, T* out,
                       int64_t n) {
  switch (kind) {
    case ActivationKind::kGelu:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in[i];
        out[i] = T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
      }
      return;
    case ActivationKind::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in[i];
        const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
        out[i] = T(0.5) * x * (T(1) + std::tanh(u));
      }
      return;
    case ActivationKind::kSilu:
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] * Sigmoid(in[i]);
      return;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(in[i]);
      return;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) out[i] = Sigmoid(in[i]);
      return;
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in[i];
        out[i] = x > T(0) ? x : slope * x;
      }
      return;
  }
}

template <typename T>
void ActivationBackward(ActivationKind kind, T slope, const T* in,
                        const T* grad_out, T* grad_in, int64_t n) {
  switch (kind) {
    case ActivationKind::kGelu:
      // d/dx x Phi(x) = Phi(x) + x phi(x).
      for (int64_t i = 0; i < n; ++i) {
        const T x = in[i];
        const T cdf = T(0.5) * (T(1) + std::erf(x * T(kInvSqrt2)));
        const T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
        grad_in[i] = grad_out[i] * (cdf + x * pdf);
      }
      return;
    case ActivationKind::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in[i];
        const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
        const T t = std::tanh(u);
        const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
        grad_in[i] = grad_out[i] *
                     (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
      }
      return;
    case ActivationKind::kSilu:
      for (int64_t i = 0; i < n; ++i) {
        const T x = in[i];
        const T s = Sigmoid(x);
        grad_in[i] = grad_out[i] * (s * (T(1) + x * (T(1) - s)));
      }
      return;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) {
        const T t = std::tanh(in[i]);
        grad_in[i] = grad_out[i] * (T(1) - t * t);
      }
      return;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) {
        const T s = Sigmoid(in[i]);
        grad_in[i] = grad_out[i] * (s * (T(1) - s));
      }
      return;
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) {
        grad_in[i] = in[i] > T(0) ? grad_out[i] : slope * grad_out[i];
      }
      return;
  }
}

template void ActivationForward<float>(ActivationKind, float, const float*,
                                       float*, int64_t);
template void ActivationForward<double>(ActivationKind, double, const double*,
                                        double*, int64_t);
template void ActivationBackward<float>(ActivationKind, float, const float*,
                                        const float*, float*, int64_t);
template void ActivationBackward<double>(ActivationKind, double, const double*,
                                         const double*, double*, int64_t);

}  // namespace cohort
