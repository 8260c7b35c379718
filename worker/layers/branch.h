// A branch block: several paths (chains of layers) over the same input,
// whose outputs are concatenated along the channels (the features of a flat
// input), summed or multiplied. Inception-style blocks are CONCAT branches;
// MobileNetV2's inverted residual is a SUM branch of [expand, depthwise,
// project] and an empty path (the identity); squeeze-and-excitation is a MUL
// branch of an empty path and a gate [pool, 1x1, ReLU, 1x1, sigmoid].
//
// Layouts (layer.h): per-sample {F}, {C, L} or {C, H, W}. CONCAT needs the
// paths' outputs to have the same rank and, for spatial outputs, the same
// spatial size; the channels are the outermost dimension of the batch-inner
// layout, so the concatenation of spatial outputs is one copy per path.
// SUM needs equal shapes. MUL needs equal shapes too, except that a path
// giving {C, 1, 1} scales the others' {C, H, W}: in the batch-inner layout
// {C, N, H, W} each of its values multiplies one contiguous H*W plane.
//
// Parameters, buffers and their names concatenate the paths' in order,
// named "paths.P.I.NAME" for layer I of path P: the state_dict of a torch
// module holding `paths = nn.ModuleList([nn.Sequential(...), ...])`.
//
// Ownership: the block owns its layers and the activations and gradients
// between them (reused from step to step). Thread safety: none.
#ifndef COHORT_WORKER_LAYERS_BRANCH_H_
#define COHORT_WORKER_LAYERS_BRANCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/layers/layer.h"

namespace cohort {

enum class BranchCombine { kConcat, kSum, kMul };

template <typename T>
class Branch final : public Layer<T> {
 public:
  using Path = std::vector<std::unique_ptr<Layer<T>>>;
  Branch(std::vector<Path> paths, BranchCombine combine);

  // "branch(concat, 2 paths)" (or sum, mul).
  std::string Name() const override;
  // InvalidArgument naming the branch and the path whose output does not
  // combine with the first path's, or whose layer rejects its input.
  absl::StatusOr<Shape> Configure(const Shape& in) override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  std::vector<BasicTensor<T>*> Buffers() override;
  std::vector<std::string> BufferNames() const override;
  void SeedRandom(uint64_t seed) override;
  // The first of its paths' layers' (layer.h).
  absl::Status InputError() const override;
  void CollectSparseTables(std::vector<SparseTable*>* out) override;
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;
  // A SUM branch of two or more paths applies a ReLU or ReLU6 after it in
  // its last addition (layer.h), and Backward takes the gradient through
  // it from the branch's output, which the caller keeps alive and
  // unchanged until then.
  bool FuseActivation(FusedActivation act) override;
  // Names each path's layers "<prefix>.paths.<p>.<i>", as their
  // parameters are named.
  void TraceSublayers(LayerTrace* trace, const std::string& prefix) override;

 private:
  struct State {
    // acts[i]: layer i's output; grads[i]: dLoss/dacts[i].
    std::vector<BasicTensor<T>> acts, grads;
    BasicTensor<T> grad_in;  // dLoss/dIn through this path
    Shape out;               // per-sample output shape
    bool gate = false;       // MUL: {C, 1, 1} scaling a larger output
    // Layers whose activation the layer before applies (layer_fusion.h),
    // and one past the last layer that runs: acts[last - 1] is the output.
    std::vector<bool> skipped;
    size_t last = 0;
    std::vector<std::string> trace_names;  // "<position> <Name()>"
  };
  // The path's output tensor after Forward (the input for an empty path).
  const BasicTensor<T>& Output(size_t p, const BasicTensor<T>& in) const;
  // SUM: y = the sum of the paths' outputs, then the fused activation.
  void Sum(const BasicTensor<T>& in, BasicTensor<T>* y) const;
  // SUM: dLoss/d(the sum), given dLoss/d(the output).
  const BasicTensor<T>& SumGradient(const BasicTensor<T>& grad_out);
  // MUL: y (the batch's output) = the product of the paths' outputs.
  void Multiply(const BasicTensor<T>& in, BasicTensor<T>* y) const;
  // MUL: *g = dLoss/d(path p's output), grad_out times the other paths'
  // outputs, summed over each plane for a gate path.
  void ProductGradient(size_t p, const BasicTensor<T>& in,
                       const BasicTensor<T>& grad_out, BasicTensor<T>* g);

  std::vector<Path> paths_;
  BranchCombine combine_;
  std::vector<State> state_;
  Shape in_shape_, out_shape_;
  int64_t plane_ = 1;       // MUL: H*W of the output, what a gate scales
  BasicTensor<T> product_;  // MUL: a gate path's gradient before the sums
  const BasicTensor<T>* input_ = nullptr;           // last kTrain input
  FusedActivation fused_ = FusedActivation::kNone;  // SUM only
  const BasicTensor<T>* output_ = nullptr;          // last Forward's output
  LayerTrace* trace_ = nullptr;                     // TraceSublayers
  BasicTensor<T> activation_grad_;                  // SumGradient's
};

extern template class Branch<float>;
extern template class Branch<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_BRANCH_H_
