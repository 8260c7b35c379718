// Token and positional embeddings, the first layers of a language model.
//
// Embedding {vocab V, dim D}: per-sample input {1, L} of token ids (stored
// as floats, exact below 2^24), batch {1, N, L}; output {D, L}, batch
// {D, N, L} channel-major (layer.h): out(d, n, t) = weight[id(n, t), d],
// weight {V, D} as nn.Embedding(V, D) lays it out. Forward gathers rows of
// the weight and turns them around into the output's rows (float: 8 x 8
// blocks transposed in AVX2 registers, 16 columns = one cache line of each
// output row at a time); Backward scatter-adds the output gradient's
// columns into the rows of the weight gradient the same way, columns in
// order, so the sums are deterministic. Ids have no gradient (grad_in, when
// asked for, is zeros). An id outside [0, V) or not an integer is a CHECK
// failure: the data set validates ids when it opens its files.
//
// When a TiedLmHead (tied_lm_head.h) shares the weight, its Backward has
// already written this batch's head gradient into the weight gradient, so
// the embedding adds to it (set_accumulate_grad) instead of overwriting.
//
// PositionalEmbedding: {D, L} -> {D, L}, out(d, n, t) = in(d, n, t) +
// weight[t, d], weight {L, D} (nn.Embedding(L, D) applied to positions
// 0..L-1, GPT-2's wpe).
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layers own their scratch (ids, transposed weight). Forward and Backward
// allocate nothing once the batch size stops changing. Thread safety: none.
#ifndef COHORT_WORKER_LAYERS_EMBEDDING_H_
#define COHORT_WORKER_LAYERS_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Embedding : public Layer<T> {
 public:
  Embedding(int64_t vocab_size, int64_t dim);

  // "embedding(256, 64)".
  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  int64_t vocab_size() const { return vocab_; }
  int64_t dim() const { return dim_; }
  // Views of the bound weight {V, D} and its gradient (after Bind), for a
  // tied head.
  BasicTensor<T>& weight() { return weight_; }
  BasicTensor<T>& grad_weight() { return grad_weight_; }
  // True: Backward adds to the weight gradient (a tied head wrote it
  // first); false (default): it overwrites, as every layer does.
  void set_accumulate_grad(bool accumulate) { accumulate_ = accumulate; }

 private:
  int64_t vocab_, dim_;
  int64_t length_ = 0;  // L, after Configure
  bool accumulate_ = false;
  BasicTensor<T> weight_, grad_weight_;  // views, after Bind
  std::vector<int32_t> ids_;             // the last Forward's, column order
};

template <typename T>
class PositionalEmbedding : public Layer<T> {
 public:
  PositionalEmbedding() = default;

  // "positional_embedding(64, 256)": features and positions.
  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  int64_t dim_ = 0, length_ = 0;  // after Configure
  BasicTensor<T> weight_, grad_weight_;
  // The weight transposed to {D, L}, so both passes run over contiguous
  // rows of the channel-major activations.
  std::vector<T> scratch_;
};

extern template class Embedding<float>;
extern template class Embedding<double>;
extern template class PositionalEmbedding<float>;
extern template class PositionalEmbedding<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_EMBEDDING_H_
