#include "worker/layers/batchnorm.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/parallel.h"

namespace cohort {

template <typename T>
BatchNormBase<T>::BatchNormBase(const char* kind, BatchNormOptions o)
    : kind_(kind), options_(o) {}

template <typename T>
std::string BatchNormBase<T>::Name() const {
  return absl::StrCat(kind_, "(", channels_, ")");
}

template <typename T>
absl::Status BatchNormBase<T>::Setup(const Shape& in, bool dense) {
  if (!(options_.eps > 0.0) || !std::isfinite(options_.eps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind_, ": eps must be a positive number, got ", options_.eps));
  }
  if (!(options_.momentum >= 0.0 && options_.momentum <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind_, ": momentum must be in [0, 1], got ", options_.momentum));
  }
  if (NumElements(in) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind_, ": empty per-sample input ", ShapeString(in)));
  }
  channels_ = in[0];
  per_channel_ = NumElements(in) / channels_;
  dense_ = dense;
  running_mean_.Resize({channels_});
  running_var_.Resize({channels_});
  running_var_.Fill(T(1));
  for (auto* v : {&mean_d_, &var_d_, &invstd_, &sum_dy_, &sum_dy_xc_}) {
    v->assign(channels_, 0.0);
  }
  for (auto* v : {&mean_, &scale_, &a_, &b_, &d_}) v->assign(channels_, T(0));
  return absl::OkStatus();
}

template <typename T>
std::vector<ParamDecl> BatchNormBase<T>::Params() const {
  return {{"weight", {channels_}, ParamDecl::Init::kOnes, 1},
          {"bias", {channels_}, ParamDecl::Init::kZeros, 1}};
}

template <typename T>
void BatchNormBase<T>::Bind(std::vector<BasicTensor<T>> values,
                            std::vector<BasicTensor<T>> grads) {
  CHECK(values.size() == 2 && grads.size() == 2) << Name() << ": Bind";
  weight_ = std::move(values[0]);
  bias_ = std::move(values[1]);
  weight_grad_ = std::move(grads[0]);
  bias_grad_ = std::move(grads[1]);
}

template <typename T>
void BatchNormBase<T>::CheckInput(const BasicTensor<T>& in) const {
  const bool ok = dense_
                      ? in.rank() == 2 && in.dim(1) == channels_
                      : in.rank() >= 3 && in.dim(0) == channels_ &&
                            in.size() == channels_ * in.dim(1) * per_channel_;
  CHECK(ok) << Name() << ": input " << ShapeString(in.shape())
            << " does not match the configured per-sample shape";
}

// Dense {N, C}: one slice of all channels, each a strided column, so the
// inner loops run across channels. Batch-inner {C, N, ...}: one slice per
// channel, a contiguous run of N * per_channel_ elements; working channel by
// channel lets the second pass over a channel find it still in cache.
template <typename T>
typename BatchNormBase<T>::Slice BatchNormBase<T>::SliceAt(
    const BasicTensor<T>& in, int64_t s) const {
  if (dense_) return {{in.dim(0), channels_, 1}, 0, 0};
  const int64_t m = in.dim(1) * per_channel_;
  return {{1, 1, m}, s, s * m};
}

// Channels are independent (each slice writes only its own statistics and
// elements), so they are spread over the compute threads with the same
// result at any thread count.
template <typename T>
template <typename Body>
void BatchNormBase<T>::OverSlices(const BasicTensor<T>& in,
                                  const Body& body) const {
  const int64_t slices = dense_ ? 1 : channels_;
  const int64_t per_slice = SliceAt(in, 0).layout.count();
  ParallelItems(slices, ItemGrain(per_slice), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) body(i);
  });
}

template <typename T>
void BatchNormBase<T>::Scales(int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; ++c) {
    if (mode_ == Mode::kTrain) {
      mean_[c] = static_cast<T>(mean_d_[c]);
      invstd_[c] = 1.0 / std::sqrt(var_d_[c] + options_.eps);
    } else {
      mean_[c] = running_mean_[c];
      invstd_[c] =
          1.0 / std::sqrt(static_cast<double>(running_var_[c]) + options_.eps);
    }
    scale_[c] = static_cast<T>(weight_[c] * invstd_[c]);
  }
}

template <typename T>
void BatchNormBase<T>::NormalizeSlice(const Slice& s, const T* x, T* y) {
  const int64_t c0 = s.first, c1 = s.first + s.layout.channels;
  if (mode_ == Mode::kTrain) {
    ChannelMeanVar(s.layout, x, &mean_d_[c0], &var_d_[c0]);
  }
  Scales(c0, c1);
  ChannelNormalize(s.layout, x, &mean_[c0], &scale_[c0], bias_.data() + c0,
                   fused_, y);
}

template <typename T>
BlockedLayout BatchNormBase<T>::Blocked(const BasicTensor<T>& in) const {
  return {in.dim(1), channels_, per_channel_, block_};
}

template <typename T>
void BatchNormBase<T>::NormalizeBlocks(int64_t c0, int64_t c1, const T* x,
                                       const T* residual, bool relu, T* y) {
  const BlockedLayout l = Blocked(*in_);
  if (mode_ == Mode::kTrain) {
    BlockedMeanVar(l, x, c0, c1, mean_d_.data(), var_d_.data());
  }
  Scales(c0, c1);
  if (residual != nullptr) {
    BlockedNormalizeSum(l, x, residual, c0, c1, mean_.data(), scale_.data(),
                        bias_.data(), relu, y);
  } else {
    BlockedNormalize(l, x, c0, c1, mean_.data(), scale_.data(), bias_.data(),
                     relu, y);
  }
}

// Blocks are independent like channels (see OverSlices).
template <typename T>
template <typename Body>
void BatchNormBase<T>::OverBlocks(const Body& body) const {
  const int64_t blocks = channels_ / block_;
  const int64_t per_block = block_ * count_;
  ParallelItems(blocks, ItemGrain(per_block), [&](int64_t first, int64_t last) {
    body(first * block_, last * block_);
  });
}

template <typename T>
void BatchNormBase<T>::RunningStatistics() {
  const double m = static_cast<double>(count_);
  // PyTorch refuses a single value per channel in training; its unbiased
  // variance would divide by zero, so that case keeps the biased one.
  const double unbias = m > 1 ? m / (m - 1) : 1.0;
  const double mom = options_.momentum;
  for (int64_t c = 0; c < channels_; ++c) {
    running_mean_[c] =
        static_cast<T>((1 - mom) * running_mean_[c] + mom * mean_d_[c]);
    running_var_[c] =
        static_cast<T>((1 - mom) * running_var_[c] + mom * var_d_[c] * unbias);
  }
}

template <typename T>
void BatchNormBase<T>::Start(const BasicTensor<T>& in, BasicTensor<T>* out,
                             Mode mode) {
  CheckInput(in);
  in_ = &in;
  out_ = out;
  mode_ = mode;
  EnsureShape(out, in.shape());
}

template <typename T>
void BatchNormBase<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                               Mode mode) {
  Start(in, out, mode);
  if (block_ != 0) {
    count_ = in.dim(1) * per_channel_;
    OverBlocks([&](int64_t c0, int64_t c1) {
      NormalizeBlocks(c0, c1, in.data(), nullptr,
                      fused_ == FusedActivation::kRelu, out->data());
    });
  } else {
    count_ = SliceAt(in, 0).layout.count();
    OverSlices(in, [&](int64_t i) {
      const Slice s = SliceAt(in, i);
      NormalizeSlice(s, in.data() + s.offset, out->data() + s.offset);
    });
  }
  if (mode == Mode::kTrain) RunningStatistics();
}

template <typename T>
void BatchNormBase<T>::ForwardSum(const BasicTensor<T>& in,
                                  const BasicTensor<T>& residual, bool relu,
                                  BasicTensor<T>* out, Mode mode) {
  CHECK(block_ != 0 && fused_ == FusedActivation::kNone)
      << Name() << ": a fused sum needs channel blocks and no fused activation";
  CHECK(residual.shape() == in.shape())
      << Name() << ": residual " << ShapeString(residual.shape())
      << " vs input " << ShapeString(in.shape());
  Start(in, out, mode);
  count_ = in.dim(1) * per_channel_;
  OverBlocks([&](int64_t c0, int64_t c1) {
    NormalizeBlocks(c0, c1, in.data(), residual.data(), relu, out->data());
  });
  if (mode == Mode::kTrain) RunningStatistics();
}

// dx = k dy + b (x - mean) + d, with k = weight * invstd; the batch terms
// b and d exist only when the statistics came from this batch.
template <typename T>
void BatchNormBase<T>::GradCoefficients(int64_t c0, int64_t c1,
                                        bool input_grad) {
  const double inv_m = 1.0 / static_cast<double>(count_);
  const bool train = mode_ == Mode::kTrain;
  for (int64_t c = c0; c < c1; ++c) {
    weight_grad_[c] = static_cast<T>(invstd_[c] * sum_dy_xc_[c]);
    bias_grad_[c] = static_cast<T>(sum_dy_[c]);
    if (!input_grad) continue;
    const double k = weight_[c] * invstd_[c];
    a_[c] = static_cast<T>(k);
    b_[c] = train ? static_cast<T>(-k * invstd_[c] * invstd_[c] *
                                   sum_dy_xc_[c] * inv_m)
                  : T(0);
    d_[c] = train ? static_cast<T>(-k * sum_dy_[c] * inv_m) : T(0);
  }
}

template <typename T>
void BatchNormBase<T>::BackwardSlice(const Slice& s, const T* dy, const T* x,
                                     T* dx) {
  const int64_t c0 = s.first, c1 = s.first + s.layout.channels;
  // The activation's input, as Forward normalized it (same scale_ and
  // bias, untouched since).
  const ActivationInput<T> z{&scale_[c0], bias_.data() + c0};
  ChannelGradSums(s.layout, dy, x, z, fused_, &mean_[c0], &sum_dy_[c0],
                  &sum_dy_xc_[c0]);
  GradCoefficients(c0, c1, dx != nullptr);
  if (dx == nullptr) return;
  ChannelInputGrad(s.layout, dy, x, z, fused_, &mean_[c0], &a_[c0], &b_[c0],
                   &d_[c0], dx);
}

template <typename T>
void BatchNormBase<T>::BackwardBlocks(int64_t c0, int64_t c1, const T* dy,
                                      const T* x, T* dx) {
  const BlockedLayout l = Blocked(*in_);
  // The ReLU's input, as NormalizeBlocks computed it (same mean_, scale_
  // and bias, untouched since).
  const ActivationInput<T> relu =
      fused_ == FusedActivation::kRelu
          ? ActivationInput<T>{scale_.data(), bias_.data()}
          : ActivationInput<T>{};
  BlockedGradSums(l, dy, x, relu, c0, c1, mean_.data(), sum_dy_.data(),
                  sum_dy_xc_.data());
  GradCoefficients(c0, c1, dx != nullptr);
  if (dx == nullptr) return;
  BlockedInputGrad(l, dy, x, relu, c0, c1, mean_.data(), a_.data(), b_.data(),
                   d_.data(), dx);
}

template <typename T>
void BatchNormBase<T>::Backward(const BasicTensor<T>& grad_out,
                                BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  if (grad_in != nullptr) EnsureShape(grad_in, in_->shape());
  if (block_ != 0) {
    OverBlocks([&](int64_t c0, int64_t c1) {
      BackwardBlocks(c0, c1, grad_out.data(), in_->data(),
                     grad_in != nullptr ? grad_in->data() : nullptr);
    });
    return;
  }
  OverSlices(*in_, [&](int64_t i) {
    const Slice s = SliceAt(*in_, i);
    BackwardSlice(s, grad_out.data() + s.offset, in_->data() + s.offset,
                  grad_in != nullptr ? grad_in->data() + s.offset : nullptr);
  });
}

template <typename T>
void BatchNormBase<T>::EvalScaleShift(T* scale, T* shift) const {
  for (int64_t c = 0; c < channels_; ++c) {
    const double k =
        weight_[c] /
        std::sqrt(static_cast<double>(running_var_[c]) + options_.eps);
    scale[c] = static_cast<T>(k);
    shift[c] = static_cast<T>(bias_[c] - running_mean_[c] * k);
  }
}

template <typename T>
void BatchNormBase<T>::set_fused_relu(bool fused) {
  CHECK(!fused || block_ != 0)
      << Name() << ": a fused ReLU needs channel blocks";
  fused_ = fused ? FusedActivation::kRelu : FusedActivation::kNone;
}

template <typename T>
bool BatchNormBase<T>::FuseActivation(FusedActivation act) {
  // The blocked kernels know ReLU only.
  if (block_ != 0 && act != FusedActivation::kRelu) return false;
  fused_ = act;
  return true;
}

template <typename T>
void BatchNormBase<T>::set_channel_block(int64_t block) {
  CHECK(block == 0 || (!dense_ && channels_ > 0 && channels_ % block == 0))
      << Name() << ": channel blocks of " << block;
  CHECK(block == 0 || fused_ != FusedActivation::kRelu6)
      << Name() << ": channel blocks with a fused ReLU6";
  block_ = block;
}

template <typename T>
absl::StatusOr<Shape> BatchNorm1d<T>::Configure(const Shape& in) {
  if (in.size() != 1 && in.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batchnorm1d: expected a per-sample input of shape [F] or [C, L], "
        "got ",
        ShapeString(in)));
  }
  if (absl::Status s = this->Setup(in, /*dense=*/in.size() == 1); !s.ok()) {
    return s;
  }
  return in;
}

template <typename T>
absl::StatusOr<Shape> BatchNorm2d<T>::Configure(const Shape& in) {
  if (in.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batchnorm2d: expected a per-sample input of shape [C, H, W], got ",
        ShapeString(in)));
  }
  if (absl::Status s = this->Setup(in, /*dense=*/false); !s.ok()) return s;
  return in;
}

template class BatchNormBase<float>;
template class BatchNormBase<double>;
template class BatchNorm1d<float>;
template class BatchNorm1d<double>;
template class BatchNorm2d<float>;
template class BatchNorm2d<double>;

}  // namespace cohort
