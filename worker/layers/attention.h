// Multi-head self-attention over sequences: nn.MultiheadAttention(D, H,
// dropout, batch_first=True)(x, x, x, attn_mask=causal, need_weights=False)
// on the CPU engine's {D, N, L} layout (layer.h), per sample {D, L} ->
// {D, L}.
//
// Parameters, in PyTorch's order and names: "in_proj_weight" {3D, D} (rows
// Q, then K, then V; head h uses rows h * D/H .. of each), "in_proj_bias"
// {3D}, "out_proj.weight" {D, D}, "out_proj.bias" {D}; weights N(0, 0.02^2),
// biases zero and excluded from weight decay. The in-projection is one GEMM
// over all N * L columns; the heads' arithmetic is kernels/attention.h
// (blocked, causal blocks above the diagonal skipped; it keeps the
// probabilities for backward); the out-projection is one more GEMM.
// Dropout (train mode, p > 0) zeroes probabilities with the layer's own
// generator (SeedRandom); p = 0 draws nothing.
//
// Ownership: the layer owns its activations (the fused QKV, the heads'
// output, the probabilities and the dropout mask, reused from step to step)
// and keeps a pointer to the last forward input, which the caller keeps
// alive until Backward. Parameters are views bound by the model. Thread
// safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_ATTENTION_H_
#define COHORT_WORKER_LAYERS_ATTENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "worker/layers/layer.h"

namespace cohort {

struct AttentionOptions {
  int64_t heads = 1;  // must divide D
  bool causal = true;
  double dropout = 0;  // in [0, 1)
};

template <typename T>
class Attention : public Layer<T> {
 public:
  explicit Attention(AttentionOptions o) : options_(o) {}

  // "attention(256, heads 4, causal)".
  std::string Name() const override;
  // Accepts only {D, L} with H dividing D; InvalidArgument otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void SeedRandom(uint64_t seed) override { rng_.seed(seed); }
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  // For an owner that adds the out-projection's bias itself, in a pass
  // over the output it makes anyway (a residual sum, AddRowBias): Forward
  // then leaves the bias out of its output. Backward is unchanged.
  void set_output_bias_deferred(bool deferred) { defer_bias_ = deferred; }
  // The out-projection's bias {D}, once bound.
  const BasicTensor<T>& output_bias() const { return b_out_; }
  // For tests: the fraction of probabilities the last forward kept (1 when
  // it drew no dropout mask).
  double KeptFraction() const;

 private:
  void DrawKeep(const AttentionDims& d);

  AttentionOptions options_;
  int64_t dim_ = 0, length_ = 0;
  BasicTensor<T> w_in_, b_in_, w_out_, b_out_;  // views
  BasicTensor<T> dw_in_, db_in_, dw_out_, db_out_;
  // {3D, stride} and {D, stride}: rows padded (kernels/attention.h).
  BasicTensor<T> qkv_, heads_, grad_heads_, grad_qkv_;
  AttentionCache<T> cache_;
  std::vector<uint8_t> keep_;
  bool dropped_ = false;  // the last forward drew keep_
  bool defer_bias_ = false;
  AttentionDims dims_;
  Rng rng_;
  const BasicTensor<T>* in_ = nullptr;
};

extern template class Attention<float>;
extern template class Attention<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_ATTENTION_H_
