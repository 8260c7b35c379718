#include "worker/gpu/layers/gpu_conv.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "kernels/cuda/ops.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;

namespace {

// The fastest algorithm cuDNN's heuristics offer in the layer's math: plain
// FMA for float32, tensor cores allowed for bf16. Gradients prefer a
// deterministic algorithm, so that a step is reproducible run to run; bf16
// falls back to the fastest one when none is deterministic.
// Transform-based algorithms (FFT, Winograd) trade accuracy for speed.
bool IsTransform(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool IsTransform(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool IsTransform(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// COHORT_CUDNN_DIRECT=1 leaves the transform-based algorithms out, to tell
// their rounding from an engine's error when comparing with the CPU.
bool DirectOnly() {
  static const bool direct = [] {
    const char* v = std::getenv("COHORT_CUDNN_DIRECT");
    return v != nullptr && std::string(v) == "1";
  }();
  return direct;
}

template <typename Perf>
absl::StatusOr<Perf> Pick(const Perf* perf, int count, bool deterministic,
                          bool bf16, absl::string_view what) {
  auto usable = [&](const Perf& p) {
    if (p.status != CUDNN_STATUS_SUCCESS) return false;
    if (DirectOnly() && IsTransform(p.algo)) return false;
    if (bf16) return p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH;
  };
  for (int i = 0; i < count; ++i) {
    if (!usable(perf[i])) continue;
    if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    return perf[i];
  }
  for (int i = 0; bf16 && i < count; ++i) {
    if (usable(perf[i])) return perf[i];
  }
  return absl::InternalError(absl::StrCat(
      what, ": cuDNN offers no ", bf16 ? "bf16" : "float32", " algorithm"));
}

}  // namespace

GpuConv::FilterDesc::~FilterDesc() {
  if (d_ != nullptr) cudnnDestroyFilterDescriptor(d_);
}

absl::Status GpuConv::FilterDesc::Set(int64_t k, int64_t c, int64_t h,
                                      int64_t w, cudnnDataType_t type) {
  if (d_ == nullptr) {
    RETURN_IF_ERROR(CudnnStatus(cudnnCreateFilterDescriptor(&d_),
                                "cudnnCreateFilterDescriptor"));
  }
  return CudnnStatus(
      cudnnSetFilter4dDescriptor(d_, type, CUDNN_TENSOR_NCHW, k, c, h, w),
      "filter descriptor");
}

GpuConv::~GpuConv() {
  if (conv_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_);
}

std::string GpuConv::Name() const {
  return absl::StrCat(one_d_ ? "conv1d(" : "conv2d(", in_.c, "->", out_, ", k",
                      k_, groups_ > 1 ? absl::StrCat(", g", groups_) : "",
                      dilation_ > 1 ? absl::StrCat(", d", dilation_) : "",
                      bf16_ ? ", bf16)" : ")");
}

absl::StatusOr<Shape> GpuConv::Configure(const Shape& in) {
  const size_t dims = one_d_ ? 2 : 3;
  if (in.size() != dims || out_ < 1 || k_ < 1 || stride_ < 1 || pad_ < 0 ||
      groups_ < 1 || dilation_ < 1 || in[0] % groups_ != 0 ||
      out_ % groups_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": cannot take input ", ShapeString(in)));
  }
  in_ = gpu_layers::AsChw(in);
  const int64_t kh = one_d_ ? 1 : k_, ph = one_d_ ? 0 : pad_;
  const int64_t sh = one_d_ ? 1 : stride_, dh = one_d_ ? 1 : dilation_;
  oh_ = (in_.h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
  ow_ = (in_.w + 2 * pad_ - dilation_ * (k_ - 1) - 1) / stride_ + 1;
  if (oh_ < 1 || ow_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": input ", ShapeString(in), " is smaller than the kernel"));
  }
  RETURN_IF_ERROR(CudnnStatus(cudnnCreateConvolutionDescriptor(&conv_),
                              "cudnnCreateConvolutionDescriptor"));
  // The compute type is float32 in both precisions.
  RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolution2dDescriptor(
                                  conv_, ph, pad_, sh, stride_, dh, dilation_,
                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                              "convolution descriptor"));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolutionGroupCount(conv_, static_cast<int>(groups_)),
      "convolution group count"));
  RETURN_IF_ERROR(
      CudnnStatus(cudnnSetConvolutionMathType(
                      conv_, bf16_ ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                  "convolution math type"));
  RETURN_IF_ERROR(w_desc_.Set(out_, in_.c / groups_, kh, k_, DataType()));
  RETURN_IF_ERROR(b_desc_.Set(1, out_, 1, 1));
  if (one_d_) return Shape{out_, ow_};
  return Shape{out_, oh_, ow_};
}

std::vector<int64_t> GpuConv::ParamSizes() const {
  if (bias_) return {WeightSize(), out_};
  return {WeightSize()};
}

void GpuConv::Bind(const std::vector<float*>& v, const std::vector<float*>& g) {
  w_ = v[0];
  dw_ = g[0];
  if (bias_) {
    b_ = v[1];
    db_ = g[1];
  }
}

absl::Status GpuConv::Forward(GpuContext& c, const float* in, float* out,
                              int64_t n, Mode) {
  RETURN_IF_ERROR(SetBatch(c, n));
  in_ptr_ = in;
  ASSIGN_OR_RETURN(void* ws, c.Workspace(workspace_));
  const void* x = in;
  const void* w = w_;
  void* y = out;
  if (bf16_) {
    RETURN_IF_ERROR(gpu_layers::ToBf16(c, in, n * InSize(), x16_));
    RETURN_IF_ERROR(gpu_layers::ToBf16(c, w_, WeightSize(), w16_));
    ASSIGN_OR_RETURN(y, c.Scratch(GpuContext::Slot::kLowpA,
                                  n * OutSize() * sizeof(uint16_t)));
    x = x16_.halves();
    w = w16_.halves();
  }
  RETURN_IF_ERROR(
      CudnnStatus(cudnnConvolutionForward(c.cudnn(), &kOne, x_desc_.get(), x,
                                          w_desc_.get(), w, conv_, fwd_, ws,
                                          workspace_, &kZero, y_desc_.get(), y),
                  absl::StrCat(Name(), " forward")));
  if (bf16_) {
    RETURN_IF_ERROR(gpu::Bf16ToFloat(static_cast<const uint16_t*>(y), out,
                                     n * OutSize(), c.stream()));
  }
  if (!bias_) return absl::OkStatus();
  return CudnnStatus(cudnnAddTensor(c.cudnn(), &kOne, b_desc_.get(), b_, &kOne,
                                    y32_desc_.get(), out),
                     absl::StrCat(Name(), " bias"));
}

absl::Status GpuConv::Backward(GpuContext& c, const float* dy, float* dx) {
  if (bias_) {
    RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardBias(c.cudnn(), &kOne, y32_desc_.get(), dy,
                                     &kZero, b_desc_.get(), db_),
        absl::StrCat(Name(), " bias gradient")));
  }
  if (bf16_) return BackwardBf16(c, dy, dx);
  ASSIGN_OR_RETURN(void* ws, c.Workspace(workspace_));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(c.cudnn(), &kOne, x_desc_.get(), in_ptr_,
                                     y_desc_.get(), dy, conv_, bwd_filter_, ws,
                                     workspace_, &kZero, w_desc_.get(), dw_),
      absl::StrCat(Name(), " weight gradient")));
  if (dx == nullptr) return absl::OkStatus();
  return CudnnStatus(
      cudnnConvolutionBackwardData(c.cudnn(), &kOne, w_desc_.get(), w_,
                                   y_desc_.get(), dy, conv_, bwd_data_, ws,
                                   workspace_, &kZero, x_desc_.get(), dx),
      absl::StrCat(Name(), " input gradient"));
}

absl::Status GpuConv::BackwardBf16(GpuContext& c, const float* dy, float* dx) {
  const int64_t n = n_;
  ASSIGN_OR_RETURN(const uint16_t* dy16,
                   gpu_layers::ToBf16Scratch(c, dy, n * OutSize(),
                                             GpuContext::Slot::kLowpA));
  ASSIGN_OR_RETURN(void* dw16, c.Scratch(GpuContext::Slot::kLowpB,
                                         WeightSize() * sizeof(uint16_t)));
  ASSIGN_OR_RETURN(void* ws, c.Workspace(workspace_));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(
          c.cudnn(), &kOne, x_desc_.get(), x16_.halves(), y_desc_.get(), dy16,
          conv_, bwd_filter_, ws, workspace_, &kZero, w_desc_.get(), dw16),
      absl::StrCat(Name(), " weight gradient")));
  RETURN_IF_ERROR(gpu::Bf16ToFloat(static_cast<const uint16_t*>(dw16), dw_,
                                   WeightSize(), c.stream()));
  if (dx == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(void* dx16, c.Scratch(GpuContext::Slot::kLowpC,
                                         n * InSize() * sizeof(uint16_t)));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardData(
          c.cudnn(), &kOne, w_desc_.get(), w16_.halves(), y_desc_.get(), dy16,
          conv_, bwd_data_, ws, workspace_, &kZero, x_desc_.get(), dx16),
      absl::StrCat(Name(), " input gradient")));
  return gpu::Bf16ToFloat(static_cast<const uint16_t*>(dx16), dx, n * InSize(),
                          c.stream());
}

absl::Status GpuConv::SetBatch(GpuContext& c, int64_t n) {
  if (n == n_) return absl::OkStatus();
  RETURN_IF_ERROR(x_desc_.Set(n, in_.c, in_.h, in_.w, DataType()));
  RETURN_IF_ERROR(y_desc_.Set(n, out_, oh_, ow_, DataType()));
  RETURN_IF_ERROR(y32_desc_.Set(n, out_, oh_, ow_));
  RETURN_IF_ERROR(ChooseAlgorithms(c));
  n_ = n;
  return absl::OkStatus();
}

absl::Status GpuConv::ChooseAlgorithms(GpuContext& c) {
  constexpr int kMax = 16;
  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t f[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                                  c.cudnn(), x_desc_.get(), w_desc_.get(),
                                  conv_, y_desc_.get(), kMax, &count, f),
                              "choosing a forward algorithm"));
  ASSIGN_OR_RETURN(auto fwd, Pick(f, count, false, bf16_, Name()));
  cudnnConvolutionBwdDataAlgoPerf_t d[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                  c.cudnn(), w_desc_.get(), y_desc_.get(),
                                  conv_, x_desc_.get(), kMax, &count, d),
                              "choosing a backward-data algorithm"));
  ASSIGN_OR_RETURN(auto data, Pick(d, count, true, bf16_, Name()));
  cudnnConvolutionBwdFilterAlgoPerf_t w[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                  c.cudnn(), x_desc_.get(), y_desc_.get(),
                                  conv_, w_desc_.get(), kMax, &count, w),
                              "choosing a backward-filter algorithm"));
  ASSIGN_OR_RETURN(auto filter, Pick(w, count, true, bf16_, Name()));
  fwd_ = fwd.algo;
  bwd_data_ = data.algo;
  bwd_filter_ = filter.algo;
  if (std::getenv("COHORT_CUDNN_LOG") != nullptr) {
    std::fprintf(stderr, "%s: cuDNN forward %d, data %d, filter %d\n",
                 Name().c_str(), fwd_, bwd_data_, bwd_filter_);
  }
  workspace_ = std::max({fwd.memory, data.memory, filter.memory});
  return absl::OkStatus();
}

}  // namespace cohort
