#include "worker/gpu/layers/gpu_embedding.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sequence_ops.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;

std::string GpuEmbedding::Name() const {
  return absl::StrCat("embedding(", vocab_, ", ", dim_, ")");
}

absl::StatusOr<Shape> GpuEmbedding::Configure(const Shape& in) {
  if (vocab_ < 1 || dim_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": vocab_size and dim must be positive"));
  }
  if (in.size() != 2 || in[0] != 1 || in[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(),
                     ": expects token ids {1, L} (a TOKENS data set, as the "
                     "model's first layer) but got ",
                     ShapeString(in)));
  }
  l_ = in[1];
  return Shape{dim_, l_};
}

absl::Status GpuEmbedding::Forward(GpuContext& c, const float* in, float* out,
                                   int64_t n, Mode) {
  ids_ = in;
  n_ = n;
  return gpu::EmbeddingForward({n, dim_, l_}, vocab_, in, weight_, out,
                               c.stream());
}

absl::Status GpuEmbedding::Backward(GpuContext& c, const float* dy, float* dx) {
  const size_t bytes = gpu::EmbeddingBackwardWorkspaceBytes(n_ * l_, vocab_);
  RETURN_IF_ERROR(sort_space_.Reserve(bytes / sizeof(float) + 1));
  RETURN_IF_ERROR(gpu::EmbeddingBackward(
      {n_, dim_, l_}, vocab_, ids_, dy, weight_grad_, tied_, sort_space_.data(),
      sort_space_.capacity() * sizeof(float), c.stream()));
  if (dx == nullptr) return absl::OkStatus();
  return CudaStatus(cudaMemsetAsync(dx, 0, n_ * l_ * sizeof(float), c.stream()),
                    "embedding: clearing the ids' gradient");
}

std::string GpuPositionalEmbedding::Name() const {
  return absl::StrCat("positional_embedding(", l_, ", ", d_, ")");
}

absl::StatusOr<Shape> GpuPositionalEmbedding::Configure(const Shape& in) {
  if (in.size() != 2 || in[0] < 1 || in[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("positional_embedding: expects a sequence {D, L} but "
                     "got ",
                     ShapeString(in)));
  }
  d_ = in[0];
  l_ = in[1];
  return in;
}

absl::Status GpuPositionalEmbedding::Forward(GpuContext& c, const float* in,
                                             float* out, int64_t n, Mode) {
  n_ = n;
  return gpu::PositionalForward({n, d_, l_}, in, weight_, out, c.stream());
}

absl::Status GpuPositionalEmbedding::Backward(GpuContext& c, const float* dy,
                                              float* dx) {
  RETURN_IF_ERROR(
      gpu::PositionalWeightGrad({n_, d_, l_}, dy, weight_grad_, c.stream()));
  if (dx == nullptr) return absl::OkStatus();
  return gpu_layers::CopyOnDevice(c, dx, dy, n_ * d_ * l_);
}

std::string GpuTiedHead::Name() const {
  if (embedding_ == nullptr) return "tied_lm_head";
  return absl::StrCat("tied_lm_head(", d_, " -> ", embedding_->vocab(), ")");
}

absl::StatusOr<Shape> GpuTiedHead::Configure(const Shape& in) {
  if (embedding_ == nullptr) {
    return absl::InvalidArgumentError(
        "tied_lm_head: needs an embedding layer earlier in the model");
  }
  if (in.size() != 2 || in[0] != embedding_->dim() || in[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tied_lm_head: expects a sequence {", embedding_->dim(),
                     ", L} (the embedding's dim) but got ", ShapeString(in)));
  }
  d_ = in[0];
  l_ = in[1];
  return Shape{embedding_->vocab(), l_};
}

// cuBLAS is column-major: a row-major {D, L} sample is its L x D transpose,
// the row-major {V, D} weight a D x V matrix.
absl::Status GpuTiedHead::Forward(GpuContext& c, const float* in, float* out,
                                  int64_t n, Mode) {
  in_ = in;
  n_ = n;
  if (n == 0) return absl::OkStatus();
  const int64_t v = embedding_->vocab();
  // out[n]^T (L x V) = x[n]^T (L x D) E^T (D x V).
  return CublasStatus(
      cublasSgemmStridedBatched(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, l_, v, d_,
                                &kOne, in, l_, d_ * l_, embedding_->weight(),
                                d_, 0, &kZero, out, l_, v * l_, n),
      "tied_lm_head forward");
}

absl::Status GpuTiedHead::Backward(GpuContext& c, const float* dy, float* dx) {
  const int64_t v = embedding_->vocab();
  float* dw = embedding_->weight_grad();
  if (n_ == 0) {
    return CudaStatus(
        cudaMemsetAsync(dw, 0, v * d_ * sizeof(float), c.stream()),
        "tied_lm_head: clearing the weight gradient");
  }
  // dE^T (D x V) = sum_n x[n] (D x L) dy[n]^T (L x V), written here first
  // (the embedding adds its part later in the pass), in sample order.
  for (int64_t i = 0; i < n_; ++i) {
    const float* beta = i == 0 ? &kZero : &kOne;
    RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(c.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, d_, v, l_, &kOne,
                    in_ + i * d_ * l_, l_, dy + i * v * l_, l_, beta, dw, d_),
        "tied_lm_head weight gradient"));
  }
  if (dx == nullptr) return absl::OkStatus();
  // dx[n]^T (L x D) = dy[n]^T (L x V) E (V x D).
  return CublasStatus(
      cublasSgemmStridedBatched(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, l_, d_, v,
                                &kOne, dy, l_, v * l_, embedding_->weight(), d_,
                                0, &kZero, dx, l_, d_ * l_, n_),
      "tied_lm_head input gradient");
}

}  // namespace cohort
