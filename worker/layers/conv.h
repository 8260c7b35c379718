// 2-D and 1-D convolution layers (zero padding; Conv2d also rectangular
// kernels and strides and PyTorch's padding="same").
//
// Batch-inner activations (see layer.h): Conv2d maps {C, N, H, W} to
// {OC, N, OH, OW} and Conv1d maps {C, N, L} to {OC, N, OL}; per-sample shapes
// are {C, H, W} and {C, L}. Parameters use PyTorch's layout and
// initialisation: weight {OC, C/G, KH, KW} (Conv1d: {OC, C/G, K}) for G
// groups, bias {OC}, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
// fan_in = C/G * KH * KW (C/G * K). Groups and dilation as PyTorch's.
// The arithmetic lives in kernels/conv.h (AVX2 kernels for float stride 1,
// im2col + OpenBLAS otherwise).
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer owns a ConvWorkspace whose buffers are reused from step to step, and
// keeps a pointer to the last training input, which the caller keeps alive
// until Backward (see Layer). Thread safety: none.
#ifndef COHORT_WORKER_LAYERS_CONV_H_
#define COHORT_WORKER_LAYERS_CONV_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/conv_window.h"
#include "common/tensor.h"
#include "kernels/conv.h"
#include "worker/layers/layer.h"

namespace cohort {

struct ConvOptions {
  int64_t out_channels = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = true;
  int64_t groups = 1;    // divides the input and output channels
  int64_t dilation = 1;  // spacing between kernel taps
  // Conv2d's window per dim (kernel_hw, stride_hw, padding_hw, padding
  // SAME); when set it replaces kernel, stride, padding and dilation above.
  std::optional<ConvWindow> window;
};

// The shared implementation; `spatial_dims` is 2 for Conv2d, 1 for Conv1d.
template <typename T>
class ConvLayer : public Layer<T> {
 public:
  // "conv2d(6->16, k5)", with ", s2", ", p2", ", no bias" when they apply
  // and "?" for the input channels before Configure.
  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  const ConvOptions& options() const { return options_; }
  // Per-sample geometry (batch 1) after Configure.
  const ConvGeometry& geometry() const { return geometry_; }
  // Lets tests and benchmarks force the im2col algorithm.
  void set_algorithm(ConvAlgorithm a) { workspace_.algorithm = a; }
  // For an owner that keeps this layer's activations in oneDNN's
  // nChw{block}c layout (kernels/channel_blocked.h; float, groups = 1):
  // Forward and Backward then read and write that layout, shapes unchanged.
  // 0 returns to batch-inner.
  void set_channel_block(int64_t block) { workspace_.channel_block = block; }
  // Evaluation with channel blocks set (float, no bias): out = act(conv(in)
  // * scale[oc] + shift[oc] + residual), residual optional, act ReLU when
  // `relu` (kernels/conv.h's ConvForwardScaled).
  void ForwardScaled(const BasicTensor<T>& in, const T* scale, const T* shift,
                     const BasicTensor<T>* residual, bool relu,
                     BasicTensor<T>* out);
  // The scaled forward then converts the weights once, not on every call.
  void FreezeParameters() override { workspace_.weights_frozen = true; }

 protected:
  ConvLayer(ConvOptions options, int spatial_dims);

 private:
  absl::Status CheckOptions() const;
  // The geometry's kernel, stride and padding from the options.
  void SetWindow(ConvGeometry* g) const;
  bool HasShape(const BasicTensor<T>& t, int64_t channels, int64_t batch,
                int64_t h, int64_t w) const;
  void EnsureShape(BasicTensor<T>* t, int64_t channels, int64_t batch,
                   int64_t h, int64_t w) const;

  ConvOptions options_;
  int spatial_dims_;
  bool configured_ = false;
  ConvGeometry geometry_;
  ConvWorkspace<T> workspace_;
  BasicTensor<T> weight_, bias_;  // views, after Bind
  BasicTensor<T> grad_weight_, grad_bias_;
  const BasicTensor<T>* input_ = nullptr;  // last kTrain input
};

template <typename T>
class Conv2d final : public ConvLayer<T> {
 public:
  explicit Conv2d(ConvOptions o) : ConvLayer<T>(o, 2) {}
};

template <typename T>
class Conv1d final : public ConvLayer<T> {
 public:
  explicit Conv1d(ConvOptions o) : ConvLayer<T>(o, 1) {}
};

extern template class ConvLayer<float>;
extern template class ConvLayer<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_CONV_H_
