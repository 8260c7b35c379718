// PReLU (PyTorch's nn.PReLU(num_parameters, init)): y = x > 0 ? x : a * x
// with a learned slope `a` per channel (the features of dense {N, F}, the
// channels of batch-inner {C, N, L} and {C, N, H, W}) or one shared by all
// (kernels/prelu.h). Parameter "weight" {num_parameters}, starting at
// `init` everywhere, as PyTorch's.
//
// Ownership: the layer does not own its weight (a view bound by the model)
// and keeps a pointer to the last forward input, which the caller keeps
// alive until Backward. Thread safety: none; one replica's thread drives a
// layer.
#ifndef COHORT_WORKER_LAYERS_PRELU_H_
#define COHORT_WORKER_LAYERS_PRELU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/prelu.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Prelu : public Layer<T> {
 public:
  // `num_parameters`: 1 (one slope) or the input's channels.
  Prelu(int64_t num_parameters, double init)
      : num_parameters_(num_parameters), init_(init) {}

  std::string Name() const override;
  // Per-sample {F}, {C, L} or {C, H, W}; num_parameters 1 or F or C.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

 private:
  // The batch `in` as [outer, channels, inner], channel c on slope c.
  PreluGeometry Geometry(const BasicTensor<T>& in) const;

  const int64_t num_parameters_;
  const double init_;
  Shape sample_;
  BasicTensor<T> weight_, weight_grad_;
  const BasicTensor<T>* in_ = nullptr;
};

extern template class Prelu<float>;
extern template class Prelu<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_PRELU_H_
