// Linear (fully connected) layer: out = in * weight^T + bias.
//
// Over the flattened sample: dense activations {N, F}, per-sample input
// {in}, output {out}. At each position of a sequence (per_position, as
// nn.Linear on [N, L, C]): per-sample {C, L} -> {out, L}, batch-inner
// {C, N, L} -> {out, N, L} (layer.h), the same map at every column.
// Parameters use PyTorch's layout and initialisation in both forms: weight
// {out, in}, bias {out}, both U(-1/sqrt(in), 1/sqrt(in)), where `in` is F,
// or C per position. Each pass is one GEMM over the whole batch (per
// position, over all N * L columns; kernels/gemm.h: in-place AVX2 kernels
// at small sizes, OpenBLAS above); the bias is written into the output
// before the GEMM accumulates onto it, so no second pass touches the
// output.
//
// Ownership: parameters are views into the model's buffers (Bind); the
// layer keeps a pointer to the last training input, which the caller keeps
// alive until Backward (see Layer). Forward and Backward allocate nothing
// once the batch size stops changing. Thread safety: none.
#ifndef COHORT_WORKER_LAYERS_LINEAR_H_
#define COHORT_WORKER_LAYERS_LINEAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "worker/layers/layer.h"

namespace cohort {

template <typename T>
class Linear : public Layer<T> {
 public:
  explicit Linear(int64_t out_features, bool bias = true,
                  bool per_position = false);

  // "linear(400->120)", "linear(64->256, per position)"; "?" for the input
  // size before Configure.
  std::string Name() const override;
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool has_bias() const { return has_bias_; }
  bool per_position() const { return per_position_; }

 private:
  // Per position: in {C, N, L} -> out {O, N, L}, out = W in + bias.
  void ForwardPerPosition(const BasicTensor<T>& in, BasicTensor<T>* out);
  void BackwardPerPosition(const BasicTensor<T>& grad_out,
                           BasicTensor<T>* grad_in);

  int64_t in_features_ = 0;  // 0 until Configure
  int64_t length_ = 0;       // per_position: L, after Configure
  int64_t out_features_;
  bool has_bias_, per_position_;
  BasicTensor<T> weight_, bias_;  // views, after Bind
  BasicTensor<T> grad_weight_, grad_bias_;
  const BasicTensor<T>* input_ = nullptr;  // last kTrain input
};

extern template class Linear<float>;
extern template class Linear<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_LINEAR_H_
