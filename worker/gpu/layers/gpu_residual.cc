#include "worker/gpu/layers/gpu_residual.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "proto/job.pb.h"
#include "worker/gpu/layers/gpu_layer_util.h"

namespace cohort {

using gpu_layers::kOne;

GpuResidual::GpuResidual(int64_t out, int64_t stride, bool bottleneck,
                         bool bf16)
    : out_(out), stride_(stride), bottleneck_(bottleneck), bf16_(bf16) {
  const int64_t width = bottleneck ? out / 4 : out;
  if (bottleneck) {
    AddStage(width, 1, 1, 0);
    AddStage(width, 3, stride_, 1);
    AddStage(out, 1, 1, 0);
  } else {
    AddStage(out, 3, stride_, 1);
    AddStage(out, 3, 1, 1);
  }
}

std::string GpuResidual::Name() const {
  return absl::StrCat(bottleneck_ ? "bottleneck(" : "residual(", in_c_, "->",
                      out_, ", stride ", stride_, ")");
}

absl::StatusOr<Shape> GpuResidual::Configure(const Shape& in) {
  if (in.size() != 3 || out_ < 1 || stride_ < 1 ||
      (bottleneck_ && out_ % 4 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": expects {channels, height, width} and a positive stride",
        bottleneck_ ? " and out_channels a multiple of 4" : "", ", got ",
        ShapeString(in)));
  }
  in_c_ = in[0];
  in_size_ = NumElements(in);
  Shape shape = in;
  for (Stage& st : stages_) {
    ASSIGN_OR_RETURN(shape, st.conv->Configure(shape));
    RETURN_IF_ERROR(st.bn->Configure(shape).status());
    if (st.relu != nullptr) RETURN_IF_ERROR(st.relu->Configure(shape).status());
    st.size = NumElements(shape);
    widest_ = std::max(widest_, st.size);
  }
  RETURN_IF_ERROR(relu_out_.Configure(shape).status());
  out_size_ = NumElements(shape);
  // As the CPU block decides: a downsample exactly when the shape changes.
  if (shape != in) {
    down_conv_ =
        std::make_unique<GpuConv>(out_, 1, stride_, 0, false, false, bf16_);
    down_bn_ = std::make_unique<GpuBatchNorm>(BatchNormSpec(), true);
    ASSIGN_OR_RETURN(const Shape s, down_conv_->Configure(in));
    if (s != shape) {
      return absl::InternalError(absl::StrCat(
          Name(), ": shortcut ", ShapeString(s), " vs ", ShapeString(shape)));
    }
    RETURN_IF_ERROR(down_bn_->Configure(s).status());
  }
  return shape;
}

std::vector<int64_t> GpuResidual::ParamSizes() const {
  std::vector<int64_t> sizes;
  for (const GpuLayer* l : Parts()) {
    for (int64_t s : l->ParamSizes()) sizes.push_back(s);
  }
  return sizes;
}

void GpuResidual::Bind(const std::vector<float*>& v,
                       const std::vector<float*>& g) {
  size_t i = 0;
  for (GpuLayer* l : Parts()) {
    const size_t k = l->ParamSizes().size();
    l->Bind(std::vector<float*>(v.begin() + i, v.begin() + i + k),
            std::vector<float*>(g.begin() + i, g.begin() + i + k));
    i += k;
  }
}

std::vector<std::pair<float*, int64_t>> GpuResidual::Buffers() {
  std::vector<std::pair<float*, int64_t>> all;
  for (GpuLayer* l : Parts()) {
    for (auto b : l->Buffers()) all.push_back(b);
  }
  return all;
}

absl::Status GpuResidual::Forward(GpuContext& c, const float* in, float* out,
                                  int64_t n, Mode mode) {
  RETURN_IF_ERROR(Reserve(n));
  n_ = n;
  const float* x = in;
  for (size_t i = 0; i < stages_.size(); ++i) {
    Stage& st = stages_[i];
    const bool last = i + 1 == stages_.size();
    RETURN_IF_ERROR(st.conv->Forward(c, x, st.a.data(), n, mode));
    float* bn_out = last ? sum_.data() : st.b.data();
    RETURN_IF_ERROR(st.bn->Forward(c, st.a.data(), bn_out, n, mode));
    if (last) break;
    RETURN_IF_ERROR(st.relu->Forward(c, st.b.data(), st.r.data(), n, mode));
    x = st.r.data();
  }
  const float* shortcut = in;
  if (down_conv_ != nullptr) {
    RETURN_IF_ERROR(down_conv_->Forward(c, in, s1_.data(), n, mode));
    RETURN_IF_ERROR(down_bn_->Forward(c, s1_.data(), s2_.data(), n, mode));
    shortcut = s2_.data();
  }
  RETURN_IF_ERROR(CublasStatus(cublasSaxpy(c.cublas(), n * out_size_, &kOne,
                                           shortcut, 1, sum_.data(), 1),
                               "residual sum"));
  return relu_out_.Forward(c, sum_.data(), out, n, mode);
}

absl::Status GpuResidual::Backward(GpuContext& c, const float* dy, float* dx) {
  const int64_t n = n_;
  using Slot = GpuContext::Slot;
  ASSIGN_OR_RETURN(float* g_sum, Floats(c, Slot::kBlockSum, n * out_size_));
  ASSIGN_OR_RETURN(float* mid_a, Floats(c, Slot::kBlockMidA, n * widest_));
  ASSIGN_OR_RETURN(float* mid_b, Floats(c, Slot::kBlockMidB, n * widest_));
  // g_sum is the gradient at the sum; it flows into both branches.
  RETURN_IF_ERROR(relu_out_.Backward(c, dy, g_sum));
  // Parameter order puts the shortcut last, but its gradients do not
  // depend on the main branch's.
  float* g_in = nullptr;
  if (down_conv_ != nullptr) {
    ASSIGN_OR_RETURN(float* g_s1, Floats(c, Slot::kBlockShort, n * out_size_));
    if (dx != nullptr) {
      ASSIGN_OR_RETURN(g_in, Floats(c, Slot::kBlockIn, n * in_size_));
    }
    RETURN_IF_ERROR(down_bn_->Backward(c, g_sum, g_s1));
    RETURN_IF_ERROR(down_conv_->Backward(c, g_s1, g_in));
  }
  // Each step writes the buffer the previous one did not: g -> other.
  const float* g = g_sum;
  float* other = mid_a;
  auto flip = [&](float* written) {
    g = written;
    other = written == mid_a ? mid_b : mid_a;
  };
  for (size_t i = stages_.size(); i-- > 0;) {
    Stage& st = stages_[i];
    if (st.relu != nullptr) {
      RETURN_IF_ERROR(st.relu->Backward(c, g, other));
      flip(other);
    }
    RETURN_IF_ERROR(st.bn->Backward(c, g, other));
    flip(other);
    float* target = i == 0 ? dx : other;
    RETURN_IF_ERROR(st.conv->Backward(c, g, target));
    if (i > 0) flip(other);
  }
  if (dx == nullptr) return absl::OkStatus();
  const float* shortcut = down_conv_ != nullptr ? g_in : g_sum;
  return CublasStatus(
      cublasSaxpy(c.cublas(), n * in_size_, &kOne, shortcut, 1, dx, 1),
      "residual input gradient");
}

void GpuResidual::AddStage(int64_t out, int64_t k, int64_t stride,
                           int64_t pad) {
  if (!stages_.empty()) stages_.back().relu = std::make_unique<GpuRelu>();
  Stage st;
  st.conv = std::make_unique<GpuConv>(out, k, stride, pad, false, false, bf16_);
  st.bn = std::make_unique<GpuBatchNorm>(BatchNormSpec(), true);
  stages_.push_back(std::move(st));
}

std::vector<GpuLayer*> GpuResidual::Parts() const {
  std::vector<GpuLayer*> p;
  for (const Stage& st : stages_) {
    p.push_back(st.conv.get());
    p.push_back(st.bn.get());
  }
  if (down_conv_ != nullptr) {
    p.push_back(down_conv_.get());
    p.push_back(down_bn_.get());
  }
  return p;
}

absl::StatusOr<float*> GpuResidual::Floats(GpuContext& c, GpuContext::Slot slot,
                                           int64_t count) {
  ASSIGN_OR_RETURN(void* p, c.Scratch(slot, count * sizeof(float)));
  return static_cast<float*>(p);
}

absl::Status GpuResidual::Reserve(int64_t n) {
  for (size_t i = 0; i < stages_.size(); ++i) {
    Stage& st = stages_[i];
    RETURN_IF_ERROR(st.a.Reserve(n * st.size));
    if (st.relu == nullptr) continue;
    RETURN_IF_ERROR(st.b.Reserve(n * st.size));
    RETURN_IF_ERROR(st.r.Reserve(n * st.size));
  }
  RETURN_IF_ERROR(sum_.Reserve(n * out_size_));
  if (down_conv_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(s1_.Reserve(n * out_size_));
  return s2_.Reserve(n * out_size_);
}

}  // namespace cohort
