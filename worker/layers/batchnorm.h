// Batch normalization with PyTorch's semantics: BatchNorm1d (per-sample {F},
// batch dense {N, F}; or per-sample {C, L}, batch {C, N, L}) and BatchNorm2d
// (per-sample {C, H, W}, batch {C, N, H, W}).
//
// Training normalizes with the batch mean and biased variance and updates
// running_mean / running_var with `momentum`, the variance term unbiased
// (M / (M - 1)) as PyTorch does; evaluation normalizes with the running
// statistics. Parameters: weight {C} (ones) and bias {C} (zeros).
//
// Ownership: the layer owns its running statistics (Buffers()) and
// per-channel scratch, sized once in Configure; it does not own its
// parameters (views bound by the model) and keeps a pointer to the last
// forward input, which the caller keeps alive until Backward. Thread
// safety: none; one replica's thread drives a layer.
#ifndef COHORT_WORKER_LAYERS_BATCHNORM_H_
#define COHORT_WORKER_LAYERS_BATCHNORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/batchnorm.h"
#include "kernels/batchnorm_blocked.h"
#include "worker/layers/layer.h"

namespace cohort {

struct BatchNormOptions {
  double eps = 1e-5;      // must be > 0
  double momentum = 0.1;  // in [0, 1]; PyTorch's momentum=None is not offered
};

// Everything but the accepted input shapes, shared by the two layers.
template <typename T>
class BatchNormBase : public Layer<T> {
 public:
  std::string Name() const override;
  std::vector<ParamDecl> Params() const override;
  void Bind(std::vector<BasicTensor<T>> values,
            std::vector<BasicTensor<T>> grads) override;
  std::vector<BasicTensor<T>*> Buffers() override {
    return {&running_mean_, &running_var_};
  }
  std::vector<std::string> BufferNames() const override {
    return {"running_mean", "running_var"};
  }
  void Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
               Mode mode) override;
  void Backward(const BasicTensor<T>& grad_out,
                BasicTensor<T>* grad_in) override;

  // After Configure, for an owner that keeps this layer's activations in
  // oneDNN's nChw{block}c layout (kernels/channel_blocked.h) between
  // convolutions: Forward and Backward then read and write that layout
  // (shapes stay {C, N, H, W}). 0 returns to batch-inner. Spatial inputs
  // whose channels are a multiple of `block` only.
  void set_channel_block(int64_t block);
  // With channel blocks set: applies a ReLU to the output, and Backward
  // takes the gradient of that ReLU's output, for an owner that drops the
  // ReLU layer after this one (one pass over the activation instead of two
  // each way). Backward then reads the last Forward's output, which the
  // caller keeps alive and unchanged until then.
  void set_fused_relu(bool fused);
  // The same for a chain (layer.h): ReLU in either layout, ReLU6 without
  // channel blocks, with the separate layers' bits.
  bool FuseActivation(FusedActivation act) override;

  // Forward, adding `residual` (in's shape) and then applying a ReLU when
  // `relu`, in the same pass over the activations: out = ReLU(BN(in) +
  // residual), the same bits as the three in turn. Needs channel blocks
  // and no fused activation. Backward stays the batch norm's alone: the caller
  // takes the ReLU's gradient and passes the sum's on to both branches.
  void ForwardSum(const BasicTensor<T>& in, const BasicTensor<T>& residual,
                  bool relu, BasicTensor<T>* out, Mode mode);

  // Evaluation's affine map, y = x * scale[c] + shift[c], from the running
  // statistics, for a layer before this one to fold in. Both have channels
  // elements.
  void EvalScaleShift(T* scale, T* shift) const;

 protected:
  BatchNormBase(const char* kind, BatchNormOptions o);
  // Checks the options and sizes the state for per-sample shape `in`, whose
  // first dimension is the channel; `dense` means batches are {N, C}.
  absl::Status Setup(const Shape& in, bool dense);

 private:
  // A group of channels processed together: `layout` over the elements at
  // `offset`, channels [first, first + layout.channels).
  struct Slice {
    ChannelLayout layout;
    int64_t first;
    int64_t offset;
  };
  void CheckInput(const BasicTensor<T>& in) const;
  // Checks `in` and records the pass's input, output and mode.
  void Start(const BasicTensor<T>& in, BasicTensor<T>* out, Mode mode);
  Slice SliceAt(const BasicTensor<T>& in, int64_t s) const;
  // Runs body(slice index) for every slice of `in`, on the compute threads.
  template <typename Body>
  void OverSlices(const BasicTensor<T>& in, const Body& body) const;
  void NormalizeSlice(const Slice& s, const T* x, T* y);
  void BackwardSlice(const Slice& s, const T* dy, const T* x, T* dx);
  // The channel-blocked passes, over channels [c0, c1) of whole blocks.
  BlockedLayout Blocked(const BasicTensor<T>& in) const;
  // y = BN(x) (+ residual where not null), then ReLU when `relu`.
  void NormalizeBlocks(int64_t c0, int64_t c1, const T* x, const T* residual,
                       bool relu, T* y);
  void BackwardBlocks(int64_t c0, int64_t c1, const T* dy, const T* x, T* dx);
  // Runs body(c0, c1) over ranges of whole channel blocks, on the compute
  // threads.
  template <typename Body>
  void OverBlocks(const Body& body) const;
  // scale_ (and mean_, invstd_) of channels [c0, c1) from this batch's
  // statistics (training) or the running ones.
  void Scales(int64_t c0, int64_t c1);
  // The parameter gradients of channels [c0, c1) and, when `input_grad`,
  // the input gradient's coefficients a_, b_, d_.
  void GradCoefficients(int64_t c0, int64_t c1, bool input_grad);
  void RunningStatistics();

  const char* kind_;
  BatchNormOptions options_;
  int64_t channels_ = 0;
  int64_t per_channel_ = 0;  // elements per channel and sample
  bool dense_ = false;
  BasicTensor<T> weight_, bias_, weight_grad_, bias_grad_;  // views
  BasicTensor<T> running_mean_, running_var_;
  // Per channel: statistics of the last Forward and backward coefficients.
  std::vector<double> mean_d_, var_d_, invstd_, sum_dy_, sum_dy_xc_;
  std::vector<T> mean_, scale_, a_, b_, d_;
  const BasicTensor<T>* in_ = nullptr;
  int64_t count_ = 0;  // elements per channel in the last Forward
  Mode mode_ = Mode::kTrain;
  int64_t block_ = 0;  // set_channel_block
  FusedActivation fused_ = FusedActivation::kNone;
  const BasicTensor<T>* out_ = nullptr;  // the last Forward's output
};

template <typename T>
class BatchNorm1d : public BatchNormBase<T> {
 public:
  explicit BatchNorm1d(BatchNormOptions o = {})
      : BatchNormBase<T>("batchnorm1d", o) {}
  absl::StatusOr<Shape> Configure(const Shape& in) override;
};

template <typename T>
class BatchNorm2d : public BatchNormBase<T> {
 public:
  explicit BatchNorm2d(BatchNormOptions o = {})
      : BatchNormBase<T>("batchnorm2d", o) {}
  absl::StatusOr<Shape> Configure(const Shape& in) override;
};

extern template class BatchNormBase<float>;
extern template class BatchNormBase<double>;
extern template class BatchNorm1d<float>;
extern template class BatchNorm1d<double>;
extern template class BatchNorm2d<float>;
extern template class BatchNorm2d<double>;

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_BATCHNORM_H_
