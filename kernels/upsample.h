// CPU kernels of PyTorch's nn.Upsample(scale_factor=k) over "planes", for
// an integer k: nearest (each input repeated k x k times) and bilinear with
// align_corners=False, forward and backward (the transposed map: each
// output's gradient summed back into the inputs it read). A batch-inner
// {C, N, H, W} tensor is C*N contiguous H x W planes, as in
// kernels/pool.h; NCHW is N*C of them, so the CUDA kernels
// (kernels/cuda/upsample.h) share the taps below.
//
// Plain functions of raw pointers: they own nothing and keep no state, so
// they are thread-safe for disjoint outputs. Instantiated for float and
// double.
#ifndef COHORT_KERNELS_UPSAMPLE_H_
#define COHORT_KERNELS_UPSAMPLE_H_

#include <cstdint>

namespace cohort {

enum class UpsampleMode { kNearest, kBilinear };

// Callers validate it: every size at least 1 (planes may be 0).
struct UpsampleGeometry {
  int64_t planes = 0;
  int64_t in_h = 0, in_w = 0;
  int64_t scale = 1;
};

// Where output index `i` of an axis of `in` inputs reads, bilinearly: inputs
// i0 and i1 (equal at the last input) with weights 1 - w1 and w1.
template <typename T>
struct LinearTap {
  int64_t i0, i1;
  T w1;
};

// PyTorch's source index for align_corners=False and a given scale factor:
// (i + 0.5) / k - 0.5, clamped at 0, with 1 / k rounded to T as PyTorch
// rounds it. Constexpr, so that the CUDA kernels compute the same taps.
template <typename T>
constexpr LinearTap<T> BilinearTap(int64_t i, int64_t in, int64_t scale) {
  const T ratio = T(1) / static_cast<T>(scale);
  const T src = (static_cast<T>(i) + T(0.5)) * ratio - T(0.5);
  const T at = src < T(0) ? T(0) : src;
  const int64_t i0 = static_cast<int64_t>(at);  // at >= 0: the floor
  return {i0, i0 < in - 1 ? i0 + 1 : i0, at - static_cast<T>(i0)};
}

// out (planes x in_h*scale x in_w*scale) = the input upsampled.
template <typename T>
void UpsampleForward(UpsampleMode mode, const UpsampleGeometry& g, const T* in,
                     T* out);

// grad_in (planes x in_h x in_w) = each output gradient summed into the
// inputs its output read, with the weights it read them by; overwritten,
// not accumulated.
template <typename T>
void UpsampleBackward(UpsampleMode mode, const UpsampleGeometry& g,
                      const T* grad_out, T* grad_in);

}  // namespace cohort

#endif  // COHORT_KERNELS_UPSAMPLE_H_
