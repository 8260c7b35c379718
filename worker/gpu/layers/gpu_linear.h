// Linear (fully connected) on the GPU: y[N, O] = x[N, F] W[O, F]^T + b,
// through cuBLAS. cuBLAS is column-major, so every row-major matrix here is
// its transpose to cuBLAS.
//
// Per position (LayerSpec.linear.per_position) the per-sample input is a
// sequence {C, L}, NCHW {N, C, L} for the batch, and the map applies at
// every position: y[n, :, t] = W x[n, :, t] + b. That is a kernel-1 conv1d
// whose weight {O, C, 1} has the same elements as nn.Linear's {O, C}, so
// the layer runs an owned GpuConv (as the transformer block's MLP does)
// on the same parameter views.
//
// In bf16 the three products take bf16 copies of x, W and dy and write
// float32 results (cublasGemmEx, float32 accumulation); the bias stays in
// float32.
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer owns the bf16 copies it keeps from forward for backward, and the
// per-position convolution. Thread safety: none; one thread drives a
// layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_LINEAR_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_LINEAR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_conv.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuLinear : public GpuLayer {
 public:
  GpuLinear(int64_t out, bool bias, bool bf16, bool per_position = false)
      : out_(out), bias_(bias), bf16_(bf16), per_position_(per_position) {}

  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override;
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  // c[m, n] (float32, column-major) = op(a) op(b) from bf16 operands.
  static absl::Status Gemm(GpuContext& c, cublasOperation_t ta,
                           cublasOperation_t tb, int64_t m, int64_t n,
                           int64_t k, const uint16_t* a, int64_t lda,
                           const uint16_t* b, int64_t ldb, float* out,
                           int64_t ldc, absl::string_view what);
  absl::Status BackwardBf16(GpuContext& c, const float* dy, float* dx);
  absl::StatusOr<Shape> ConfigurePerPosition(const Shape& in);

  const int64_t out_;
  const bool bias_, bf16_, per_position_;
  int64_t in_ = 0;
  // per_position: the kernel-1 convolution doing the work, after Configure.
  std::unique_ptr<GpuConv> position_;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
  int64_t n_ = 0;
  DeviceFloats x16_, w16_;  // bf16 copies kept from forward for backward
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_LINEAR_H_
