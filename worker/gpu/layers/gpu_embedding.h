// Token embedding, positional embedding and the tied language-model head
// on the GPU, with the CPU layers' parameters in the same order
// and layout (torch nn.Embedding's {V, D} and {L, D}).
//
// Sequences are NCHW on the GPU engine: a per-sample {D, L} is {N, D, L}
// for the batch; the token ids arrive as a per-sample {1, L} of floats.
//
// Weight tying: GpuModel ties a GpuTiedHead to the model's first
// GpuEmbedding (Tie). The head then multiplies by the embedding's weight
// and, running earlier in the backward pass, overwrites the embedding's
// weight gradient with its own part, which the embedding adds its
// scatter-add to (set_tied).
//
// Ownership: parameters are views into the model's buffers (Bind); the
// embedding owns its gradient's sort workspace; a tied
// head borrows its embedding, which the model owns and keeps alive. Thread
// safety: none; one thread drives a layer, on its GpuContext's stream.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_EMBEDDING_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/gpu_context.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

class GpuEmbedding : public GpuLayer {
 public:
  GpuEmbedding(int64_t vocab, int64_t dim) : vocab_(vocab), dim_(dim) {}

  std::string Name() const override;
  // Only {1, L} (the token ids) is accepted.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override { return {vocab_ * dim_}; }
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override {
    weight_ = v[0];
    weight_grad_ = g[0];
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  // Ids have no gradient: `dx`, when given, is zeroed.
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

  // A tied head writes the weight gradient first; backward then adds.
  void set_tied(bool tied) { tied_ = tied; }
  int64_t vocab() const { return vocab_; }
  int64_t dim() const { return dim_; }
  const float* weight() const { return weight_; }
  float* weight_grad() const { return weight_grad_; }

 private:
  const int64_t vocab_, dim_;
  int64_t l_ = 0, n_ = 0;
  bool tied_ = false;
  float *weight_ = nullptr, *weight_grad_ = nullptr;
  const float* ids_ = nullptr;
  DeviceFloats
      sort_space_;  // the gradient's sort (kernels/cuda/sequence_ops.h)
};

class GpuPositionalEmbedding : public GpuLayer {
 public:
  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<int64_t> ParamSizes() const override { return {l_ * d_}; }
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override {
    weight_ = v[0];
    weight_grad_ = g[0];
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

 private:
  int64_t d_ = 0, l_ = 0, n_ = 0;
  float *weight_ = nullptr, *weight_grad_ = nullptr;
};

// logits(n, v, t) = sum_d E[v, d] x(n, d, t), E the tied embedding's
// weight; float32 cuBLAS products in both precisions.
class GpuTiedHead : public GpuLayer {
 public:
  std::string Name() const override;
  // Fails unless tied, or when the input's features differ from the
  // embedding's dimension.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override;
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override;

  void Tie(GpuEmbedding* embedding) { embedding_ = embedding; }

 private:
  GpuEmbedding* embedding_ = nullptr;
  int64_t d_ = 0, l_ = 0, n_ = 0;
  const float* in_ = nullptr;
};

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_EMBEDDING_H_
