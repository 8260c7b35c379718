// Elementwise CPU kernels of the smooth, leaky and piecewise-linear
// activations (GELU, SiLU, tanh, sigmoid, LeakyReLU, ReLU6, hardsigmoid,
// hardswish), forward and backward, with PyTorch's formulas.
//
// Backward takes the forward *input* and recomputes what it needs, so a
// layer keeps no extra buffer. Each loop is branch-free over contiguous
// arrays (the activation is chosen once per call, never per element).
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. Each call splits its loop over
// the calling thread's compute team (kernels/parallel.h); the results do
// not depend on the thread count. `out` may equal `in` and
// `grad_in` may equal `grad_out`. Instantiated for float and double.
#ifndef COHORT_KERNELS_ACTIVATIONS_H_
#define COHORT_KERNELS_ACTIVATIONS_H_

#include <cstdint>
#include <string>

namespace cohort {

enum class ActivationKind {
  kGelu,      // x * Phi(x), Phi by erf (PyTorch's approximate="none")
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  kSilu,      // x * sigmoid(x)
  kTanh,
  kSigmoid,
  kLeakyRelu,    // x > 0 ? x : slope * x
  kRelu6,        // min(max(x, 0), 6)
  kHardsigmoid,  // relu6(x + 3) / 6
  kHardswish,    // x * relu6(x + 3) / 6
};

// "gelu", "gelu(tanh)", ..., "leaky_relu(0.2)": one spelling for every
// engine's layer names.
std::string ActivationName(ActivationKind kind, double slope);

// `slope` is LeakyReLU's negative slope; the other kinds ignore it.
template <typename T>
void ActivationForward(ActivationKind kind, T slope, const T* in, T* out,
                       int64_t n);

// grad_in = grad_out * f'(in).
template <typename T>
void ActivationBackward(ActivationKind kind, T slope, const T* in,
                        const T* grad_out, T* grad_in, int64_t n);

// The same over `rows` rows of `cols` elements with a per-row bias added to
// the input first, x = in[r * cols + c] + bias[r], rounded as a separate
// bias add rounds it: a channel-major product's bias applied in the
// activation's pass. Backward recomputes x the same way, so the caller
// keeps only the unbiased product.
template <typename T>
void ActivationForwardRowBias(ActivationKind kind, T slope, const T* in,
                              const T* bias, int64_t rows, int64_t cols,
                              T* out);
template <typename T>
void ActivationBackwardRowBias(ActivationKind kind, T slope, const T* in,
                               const T* bias, int64_t rows, int64_t cols,
                               const T* grad_out, T* grad_in);

}  // namespace cohort

#endif  // COHORT_KERNELS_ACTIVATIONS_H_
