// The activations a kernel can apply to its output as it writes it, so that
// a chain of layers needs no separate pass for them, with the bits of the
// separate layers (kernels/elementwise.h ReluForward, kernels/activations.h
// kRelu6), and the gradient mask taken from the activated output.
//
// Header-only scalar definitions; they hold no state.
#ifndef COHORT_KERNELS_FUSED_ACTIVATION_H_
#define COHORT_KERNELS_FUSED_ACTIVATION_H_

#include <type_traits>

namespace cohort {

enum class FusedActivation {
  kNone,
  kRelu,   // v > 0 ? v : +0
  kRelu6,  // min(max(v, 0), 6), NaN to 0
};

// The activation of v.
template <FusedActivation A, typename T>
inline __attribute__((always_inline)) T Activate(T v) {
  if constexpr (A == FusedActivation::kNone) {
    return v;
  } else {
    const T r = v > T(0) ? v : T(0);
    if constexpr (A == FusedActivation::kRelu6) return r < T(6) ? r : T(6);
    return r;
  }
}

// Whether the gradient passes where the activated output is y: inside the
// open range where the activation's slope is 1. The separate layers decide
// from their input v; y = Activate(v) lies inside that range exactly where
// v does (NaN maps to 0, outside).
template <FusedActivation A, typename T>
inline __attribute__((always_inline)) bool Passes(T y) {
  if constexpr (A == FusedActivation::kNone) {
    return true;
  } else if constexpr (A == FusedActivation::kRelu6) {
    return y > T(0) && y < T(6);
  } else {
    return y > T(0);
  }
}

// Runs f(std::integral_constant<FusedActivation, act>), so that the loops
// inside f are compiled once per activation, with no test per element.
template <typename F>
void WithActivation(FusedActivation act, const F& f) {
  using A = FusedActivation;
  switch (act) {
    case A::kRelu:
      return f(std::integral_constant<A, A::kRelu>());
    case A::kRelu6:
      return f(std::integral_constant<A, A::kRelu6>());
    default:
      return f(std::integral_constant<A, A::kNone>());
  }
}

}  // namespace cohort

#endif  // COHORT_KERNELS_FUSED_ACTIVATION_H_
