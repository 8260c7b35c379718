// Linear (fully connected) on the GPU: y[N, O] = x[N, F] W[O, F]^T + b,
// through cuBLAS. cuBLAS is column-major, so every row-major matrix here is
// its transpose to cuBLAS.
//
// In bf16 the three products take bf16 copies of x, W and dy and write
// float32 results (cublasGemmEx, float32 accumulation); the bias stays in
// float32.
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer owns the bf16 copies it keeps from forward for backward. Thread
// safety: none; one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_LINEAR_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_LINEAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuLinear : public GpuLayer {
 public:
  GpuLinear(int64_t out, bool bias, bool bf16)
      : out_(out), bias_(bias), bf16_(bf16) {}

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

  const int64_t out_;
  const bool bias_, bf16_;
  int64_t in_ = 0;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
  int64_t n_ = 0;
  DeviceFloats x16_, w16_;  // bf16 copies kept from forward for backward
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_LINEAR_H_
