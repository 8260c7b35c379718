// The output head of a language model with weight tying (GPT-2): logits
// from the token embedding's weight E {V, D}, no parameters of its own.
//
// {D, L} -> {V, L}; over the batch one GEMM, out[V, NL] = E[V, D] x[D, NL].
// Backward: dE = dOut[V, NL] x^T (written into the embedding's weight
// gradient, which the embedding's own Backward, later in the pass, adds
// to), dx = E^T dOut.
//
// The model ties it (worker/model.h): SetVocab before Configure (the output
// size is the embedding's vocabulary), Tie after the parameters are bound.
// Standing alone, Configure fails.
//
// Ownership: E and dE are views into the model's buffers; the layer keeps
// a pointer to its last training input (see Layer). Thread safety: none.
#ifndef COHORT_WORKER_LAYERS_TIED_LM_HEAD_H_
#define COHORT_WORKER_LAYERS_TIED_LM_HEAD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class TiedLmHead : public Layer<T> {
 public:
  TiedLmHead() = default;

  // "tied_lm_head(64->256)"; "?" before SetVocab.
  std::string Name() const override;
  // InvalidArgument unless SetVocab was called and `in` is {D, L} with the
  // embedding's D.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  // The tied embedding's vocabulary and width.
  void SetVocab(int64_t vocab_size, int64_t dim);
  // Views of the embedding's weight {V, D} and its gradient. With
  // `accumulate` the head adds its gradient to dE (another head wrote it
  // first in the backward pass); otherwise it overwrites.
  void Tie(BasicTensor<T> weight, BasicTensor<T> grad, bool accumulate);

 private:
  int64_t vocab_ = 0, dim_ = 0;  // after SetVocab
  bool accumulate_ = false;
  BasicTensor<T> weight_, grad_weight_;    // views, after Tie
  const BasicTensor<T>* input_ = nullptr;  // last kTrain input
};

extern template class TiedLmHead<float>;
extern template class TiedLmHead<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_TIED_LM_HEAD_H_
