// Interaction: how a recommendation model's feature vectors meet
// (LayerSpec.interaction, DLRM's interact_features).
//
// Input: a flat sample {dim (1 + T)}, dense batch {N, dim (1 + T)} (layer.h),
// read as 1 + T vectors v_0..v_T of `dim` features: v_0 the bottom MLP's
// output, v_1..v_T the embeddings. kDot gives {dim + (T + 1) T / 2}: v_0,
// then dot(v_i, v_j) for i = 1..T, j = 0..i-1 in that order (DLRM with
// arch_interaction_itself off: the strict lower triangle of V V^T, row by
// row). kCat gives the vectors as they are. Backward is exact: each pair's
// gradient flows to both of its vectors. No parameters.
//
// The dot kind runs kernels/interaction.h's vectorized kernels, which split
// the batch into ranges on the compute threads; each sample is computed by
// one thread in one fixed order, which gives the same bits at any thread
// count.
//
// Ownership: the layer keeps a pointer to the last Forward's input for
// Backward (the caller keeps it alive, layer.h). Forward and Backward
// allocate nothing once the batch size stops changing. Thread safety: none;
// one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_INTERACTION_H_
#define COHORT_WORKER_LAYERS_INTERACTION_H_

#include <cstdint>
#include <string>

#include "worker/layers/layer.h"

namespace cohort {

enum class InteractionKind { kDot, kCat };

template <typename T>
class Interaction : public Layer<T> {
 public:
  Interaction(InteractionKind kind, int64_t dim) : kind_(kind), dim_(dim) {}

  // "interaction(dot, 27 x 16)": vectors x features.
  std::string Name() const override;
  // {dim (1 + T)} -> {dim + (T + 1) T / 2} (kDot) or itself (kCat);
  // InvalidArgument naming the layer, dim and the input otherwise.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  InteractionKind kind_;
  int64_t dim_;
  int64_t vectors_ = 0;  // 1 + T, after Configure
  int64_t out_features_ = 0;
  const BasicTensor<T>* in_ = nullptr;  // the last Forward's
};

extern template class Interaction<float>;
extern template class Interaction<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_INTERACTION_H_
