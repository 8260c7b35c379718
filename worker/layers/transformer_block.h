// A pre-norm GPT transformer block over sequences, per sample {D, L} ->
// {D, L} in the CPU engine's {D, N, L} layout (layer.h):
//   h = x + drop(attn(ln1(x)))
//   y = h + drop(mlp(ln2(h))),  mlp = Linear(D, rD), GELU (erf), Linear(rD, D)
// with ln1, ln2 per-position LayerNorms (norm.h), attn the Attention layer
// (attention.h; its dropout on the probabilities is the same p) and the
// MLP's linears position-wise: one GEMM over all N * L columns each (what a
// kernel-1 conv1d does, without its dispatch).
//
// Parameters, in this order and with these names (PyTorch's state_dict of
// a module with attributes ln1, attn, ln2, mlp = nn.Sequential(Linear, GELU,
// Linear)): "ln1.weight", "ln1.bias", "attn.in_proj_weight",
// "attn.in_proj_bias", "attn.out_proj.weight", "attn.out_proj.bias",
// "ln2.weight", "ln2.bias", "mlp.0.weight" {rD, D}, "mlp.0.bias" {rD},
// "mlp.2.weight" {D, rD}, "mlp.2.bias" {D}. Weights N(0, 0.02^2); biases
// zero and norms ones/zeros, all excluded from weight decay.
//
// Ownership: the block owns its sub-layers and every intermediate
// activation (reused from step to step), and keeps a pointer to the last
// forward input, which the caller keeps alive until Backward. Parameters
// are views bound by the model. Thread safety: none; one replica's thread
// drives a layer.
#ifndef COHORT_WORKER_LAYERS_TRANSFORMER_BLOCK_H_
#define COHORT_WORKER_LAYERS_TRANSFORMER_BLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/layers/attention.h"
#include "worker/layers/dropout.h"
#include "worker/layers/layer.h"
#include "worker/layers/norm.h"

namespace cohort {

struct TransformerBlockOptions {
  int64_t heads = 1;      // must divide D
  int64_t mlp_ratio = 4;  // >= 1
  bool causal = true;
  double dropout = 0;  // in [0, 1)
  double eps = 1e-5;   // the layer norms'
};

template <typename T>
class TransformerBlock : public Layer<T> {
 public:
  explicit TransformerBlock(TransformerBlockOptions o);

  std::string Name() const override;
  // Accepts only {D, L} with H dividing D; InvalidArgument otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void SeedRandom(uint64_t seed) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  // For tests.
  const Attention<T>& attention() const { return attn_; }

 private:
  TransformerBlockOptions options_;
  int64_t dim_ = 0, length_ = 0, hidden_ = 0;
  LayerNorm<T> ln1_, ln2_;
  Attention<T> attn_;
  Dropout<T> drop1_, drop2_;
  BasicTensor<T> w1_, b1_, w2_, b2_, dw1_, db1_, dw2_, db2_;  // views
  // Activations: ln1(x), attn, its dropout, h, ln2(h), mlp hidden before
  // and after GELU, mlp output, its dropout.
  BasicTensor<T> a_ln1_, a_attn_, a_drop1_, h_, a_ln2_, m1_, g_, m2_, a_drop2_;
  // Gradients.
  BasicTensor<T> g_m2_, g_g_, g_ln2_, g_h_, g_attn_, g_ln1_, g_x_;
  const BasicTensor<T>* in_ = nullptr;
};

extern template class TransformerBlock<float>;
extern template class TransformerBlock<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_TRANSFORMER_BLOCK_H_
