// The transposed 2-D convolution layer, PyTorch's nn.ConvTranspose2d
// (square kernel, dilation 1): batch-inner {C, N, H, W} -> {OC, N, OH, OW}
// with OH = (H - 1) * stride - 2 * padding + K + output_padding.
//
// It is the adjoint of the convolution from {OC, OH, OW} to {C, H, W} with
// the same kernel, stride, padding and groups, whose weight
// {C, OC / G, K, K} is this layer's (PyTorch's layout). So the forward pass
// is that convolution's input gradient, the input gradient its forward
// pass, and the weight gradient its weight gradient with the roles of
// input and output gradient swapped: kernels/conv.h does all three, with
// its fast paths. Initialisation as PyTorch's: fan_in = OC / G * K * K.
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer owns a ConvWorkspace reused from step to step and keeps a pointer
// to the last training input, which the caller keeps alive until Backward
// (see Layer). Thread safety: none.
#ifndef COHORT_WORKER_LAYERS_CONV_TRANSPOSE_H_
#define COHORT_WORKER_LAYERS_CONV_TRANSPOSE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "kernels/conv.h"
#include "worker/layers/layer.h"

namespace cohort {

struct ConvTransposeOptions {
  int64_t out_channels = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t padding = 0;         // removed from each side of the output
  int64_t output_padding = 0;  // added after (bottom, right); < stride
  bool bias = true;
  int64_t groups = 1;  // divides the input and output channels
};

template <typename T>
class ConvTranspose2d final : public Layer<T> {
 public:
  explicit ConvTranspose2d(ConvTransposeOptions options) : options_(options) {}

  // "conv_transpose2d(8->4, k3, s2, p1, op1)".
  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  // The adjoint convolution (batch 1 before the first Forward).
  const ConvGeometry& geometry() const { return geometry_; }

 private:
  absl::Status CheckOptions() const;

  ConvTransposeOptions options_;
  bool configured_ = false;
  // The convolution from this layer's output to its input: in_channels =
  // options_.out_channels, out_channels = this layer's input channels.
  ConvGeometry geometry_;
  ConvWorkspace<T> workspace_;
  BasicTensor<T> weight_, bias_;  // views, after Bind
  BasicTensor<T> grad_weight_, grad_bias_;
  BasicTensor<T> discarded_;  // the input gradient nobody asked for
  const BasicTensor<T>* input_ = nullptr;  // last kTrain input
};

extern template class ConvTranspose2d<float>;
extern template class ConvTranspose2d<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_CONV_TRANSPOSE_H_
