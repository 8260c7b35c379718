#include "worker/gpu/layers/gpu_conv_algorithms.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace cohort {
namespace gpu_layers {
namespace {

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

FilterDesc::~FilterDesc() {
  if (d_ != nullptr) cudnnDestroyFilterDescriptor(d_);
}

absl::Status FilterDesc::Set(int64_t k, int64_t c, int64_t h, int64_t w,
                             cudnnDataType_t type) {
  if (d_ == nullptr) {
    RETURN_IF_ERROR(CudnnStatus(cudnnCreateFilterDescriptor(&d_),
                                "cudnnCreateFilterDescriptor"));
  }
  return CudnnStatus(
      cudnnSetFilter4dDescriptor(d_, type, CUDNN_TENSOR_NCHW, k, c, h, w),
      "filter descriptor");
}

absl::StatusOr<ConvAlgorithms> ChooseConvAlgorithms(
    GpuContext& c, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, bool bf16,
    const std::string& name) {
  constexpr int kMax = 16;
  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t f[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                                  c.cudnn(), x, w, conv, y, kMax, &count, f),
                              "choosing a forward algorithm"));
  ASSIGN_OR_RETURN(auto fwd, Pick(f, count, false, bf16, name));
  cudnnConvolutionBwdDataAlgoPerf_t d[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                  c.cudnn(), w, y, conv, x, kMax, &count, d),
                              "choosing a backward-data algorithm"));
  ASSIGN_OR_RETURN(auto data, Pick(d, count, true, bf16, name));
  cudnnConvolutionBwdFilterAlgoPerf_t g[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                  c.cudnn(), x, y, conv, w, kMax, &count, g),
                              "choosing a backward-filter algorithm"));
  ASSIGN_OR_RETURN(auto filter, Pick(g, count, true, bf16, name));
  ConvAlgorithms a;
  a.forward = fwd.algo;
  a.data = data.algo;
  a.filter = filter.algo;
  if (std::getenv("COHORT_CUDNN_LOG") != nullptr) {
    std::fprintf(stderr, "%s: cuDNN forward %d, data %d, filter %d\n",
                 name.c_str(), a.forward, a.data, a.filter);
  }
  a.workspace = std::max({fwd.memory, data.memory, filter.memory});
  return a;
}

}  // namespace gpu_layers
}  // namespace cohort
