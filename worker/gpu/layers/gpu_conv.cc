#include "worker/gpu/layers/gpu_conv.h"

#include <cuda_runtime.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/ops.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;

namespace {

// Copies `planes` planes of h x w floats between dense storage and planes
// of hp x wp (the top-left h x w of each), on `stream`.
absl::Status CopyPlanes(const float* from, int64_t from_h, int64_t from_w,
                        float* to, int64_t to_h, int64_t to_w, int64_t h,
                        int64_t w, int64_t planes, cudaStream_t stream) {
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(const_cast<float*>(from),
                                 from_w * sizeof(float), from_w, from_h);
  p.dstPtr = make_cudaPitchedPtr(to, to_w * sizeof(float), to_w, to_h);
  p.extent = make_cudaExtent(w * sizeof(float), h, planes);
  p.kind = cudaMemcpyDeviceToDevice;
  return CudaStatus(cudaMemcpy3DAsync(&p, stream), "padding copy");
}

}  // namespace

GpuConv::GpuConv(int64_t out, int64_t kernel, int64_t stride, int64_t pad,
                 bool bias, bool one_d, bool bf16, int64_t groups,
                 int64_t dilation)
    : out_(out), groups_(groups), bias_(bias), one_d_(one_d), bf16_(bf16) {
  kh_ = one_d ? 1 : kernel;
  kw_ = kernel;
  sh_ = one_d ? 1 : stride;
  sw_ = stride;
  dil_h_ = one_d ? 1 : dilation;
  dil_w_ = dilation;
  ph_ = one_d ? 0 : pad;
  pw_ = pad;
}

GpuConv::GpuConv(int64_t out, const ConvWindow& window, bool bias, bool bf16,
                 int64_t groups)
    : out_(out), groups_(groups), bias_(bias), one_d_(false), bf16_(bf16) {
  kh_ = window.kernel_h;
  kw_ = window.kernel_w;
  sh_ = window.stride_h;
  sw_ = window.stride_w;
  dil_h_ = dil_w_ = window.dilation;
  ph_ = window.pad_top;
  pw_ = window.pad_left;
  extra_h_ = window.pad_bottom - window.pad_top;
  extra_w_ = window.pad_right - window.pad_left;
}

GpuConv::~GpuConv() {
  if (conv_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_);
}

std::string GpuConv::Name() const {
  const std::string kernel =
      kh_ == kw_ || one_d_ ? absl::StrCat(kw_) : absl::StrCat(kh_, "x", kw_);
  return absl::StrCat(one_d_ ? "conv1d(" : "conv2d(", in_.c, "->", out_, ", k",
                      kernel, groups_ > 1 ? absl::StrCat(", g", groups_) : "",
                      dil_w_ > 1 ? absl::StrCat(", d", dil_w_) : "",
                      bf16_ ? ", bf16)" : ")");
}

absl::StatusOr<Shape> GpuConv::Configure(const Shape& in) {
  const size_t dims = one_d_ ? 2 : 3;
  if (in.size() != dims || out_ < 1 || kh_ < 1 || kw_ < 1 || sh_ < 1 ||
      sw_ < 1 || ph_ < 0 || pw_ < 0 || extra_h_ < 0 || extra_w_ < 0 ||
      groups_ < 1 || dil_h_ < 1 || dil_w_ < 1 || in[0] % groups_ != 0 ||
      out_ % groups_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": cannot take input ", ShapeString(in)));
  }
  in_ = gpu_layers::AsChw(in);
  oh_ = (in_.h + 2 * ph_ + extra_h_ - dil_h_ * (kh_ - 1) - 1) / sh_ + 1;
  ow_ = (in_.w + 2 * pw_ + extra_w_ - dil_w_ * (kw_ - 1) - 1) / sw_ + 1;
  if (in_.h + 2 * ph_ + extra_h_ < dil_h_ * (kh_ - 1) + 1 ||
      in_.w + 2 * pw_ + extra_w_ < dil_w_ * (kw_ - 1) + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(), ": input ", ShapeString(in), " is smaller than the kernel"));
  }
  RETURN_IF_ERROR(CudnnStatus(cudnnCreateConvolutionDescriptor(&conv_),
                              "cudnnCreateConvolutionDescriptor"));
  // The compute type is float32 in both precisions.
  RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolution2dDescriptor(
                                  conv_, ph_, pw_, sh_, sw_, dil_h_, dil_w_,
                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                              "convolution descriptor"));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolutionGroupCount(conv_, static_cast<int>(groups_)),
      "convolution group count"));
  RETURN_IF_ERROR(
      CudnnStatus(cudnnSetConvolutionMathType(
                      conv_, bf16_ ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                  "convolution math type"));
  RETURN_IF_ERROR(w_desc_.Set(out_, in_.c / groups_, kh_, kw_, DataType()));
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

absl::StatusOr<const float*> GpuConv::PadInput(GpuContext& c, const float* in,
                                               int64_t n) {
  RETURN_IF_ERROR(x_pad_.Reserve(n * XSize()));
  RETURN_IF_ERROR(
      CudaStatus(cudaMemsetAsync(x_pad_.data(), 0, n * XSize() * sizeof(float),
                                 c.stream()),
                 "zeroing the padded input"));
  RETURN_IF_ERROR(CopyPlanes(in, in_.h, in_.w, x_pad_.data(), in_.h + extra_h_,
                             in_.w + extra_w_, in_.h, in_.w, n * in_.c,
                             c.stream()));
  return x_pad_.data();
}

absl::Status GpuConv::CropGradient(GpuContext& c, const float* padded,
                                   float* dx, int64_t n) {
  return CopyPlanes(padded, in_.h + extra_h_, in_.w + extra_w_, dx, in_.h,
                    in_.w, in_.h, in_.w, n * in_.c, c.stream());
}

absl::Status GpuConv::Forward(GpuContext& c, const float* in, float* out,
                              int64_t n, Mode) {
  RETURN_IF_ERROR(SetBatch(c, n));
  if (Padded()) {
    ASSIGN_OR_RETURN(in, PadInput(c, in, n));
  }
  in_ptr_ = in;
  ASSIGN_OR_RETURN(void* ws, c.Workspace(algo_.workspace));
  const void* x = in;
  const void* w = w_;
  void* y = out;
  if (bf16_) {
    RETURN_IF_ERROR(gpu_layers::ToBf16(c, in, n * XSize(), x16_));
    RETURN_IF_ERROR(gpu_layers::ToBf16(c, w_, WeightSize(), w16_));
    ASSIGN_OR_RETURN(y, c.Scratch(GpuContext::Slot::kLowpA,
                                  n * OutSize() * sizeof(uint16_t)));
    x = x16_.halves();
    w = w16_.halves();
  }
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionForward(c.cudnn(), &kOne, x_desc_.get(), x, w_desc_.get(),
                              w, conv_, algo_.forward, ws, algo_.workspace,
                              &kZero, y_desc_.get(), y),
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
  ASSIGN_OR_RETURN(void* ws, c.Workspace(algo_.workspace));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(
          c.cudnn(), &kOne, x_desc_.get(), in_ptr_, y_desc_.get(), dy, conv_,
          algo_.filter, ws, algo_.workspace, &kZero, w_desc_.get(), dw_),
      absl::StrCat(Name(), " weight gradient")));
  if (dx == nullptr) return absl::OkStatus();
  float* dx_x = dx;  // the gradient of what cuDNN read
  if (Padded()) {
    RETURN_IF_ERROR(dx_pad_.Reserve(n_ * XSize()));
    dx_x = dx_pad_.data();
  }
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardData(
          c.cudnn(), &kOne, w_desc_.get(), w_, y_desc_.get(), dy, conv_,
          algo_.data, ws, algo_.workspace, &kZero, x_desc_.get(), dx_x),
      absl::StrCat(Name(), " input gradient")));
  if (!Padded()) return absl::OkStatus();
  return CropGradient(c, dx_x, dx, n_);
}

absl::Status GpuConv::BackwardBf16(GpuContext& c, const float* dy, float* dx) {
  const int64_t n = n_;
  ASSIGN_OR_RETURN(const uint16_t* dy16,
                   gpu_layers::ToBf16Scratch(c, dy, n * OutSize(),
                                             GpuContext::Slot::kLowpA));
  ASSIGN_OR_RETURN(void* dw16, c.Scratch(GpuContext::Slot::kLowpB,
                                         WeightSize() * sizeof(uint16_t)));
  ASSIGN_OR_RETURN(void* ws, c.Workspace(algo_.workspace));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(c.cudnn(), &kOne, x_desc_.get(),
                                     x16_.halves(), y_desc_.get(), dy16, conv_,
                                     algo_.filter, ws, algo_.workspace, &kZero,
                                     w_desc_.get(), dw16),
      absl::StrCat(Name(), " weight gradient")));
  RETURN_IF_ERROR(gpu::Bf16ToFloat(static_cast<const uint16_t*>(dw16), dw_,
                                   WeightSize(), c.stream()));
  if (dx == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(void* dx16, c.Scratch(GpuContext::Slot::kLowpC,
                                         n * XSize() * sizeof(uint16_t)));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardData(
          c.cudnn(), &kOne, w_desc_.get(), w16_.halves(), y_desc_.get(), dy16,
          conv_, algo_.data, ws, algo_.workspace, &kZero, x_desc_.get(), dx16),
      absl::StrCat(Name(), " input gradient")));
  if (!Padded()) {
    return gpu::Bf16ToFloat(static_cast<const uint16_t*>(dx16), dx,
                            n * InSize(), c.stream());
  }
  RETURN_IF_ERROR(dx_pad_.Reserve(n * XSize()));
  RETURN_IF_ERROR(gpu::Bf16ToFloat(static_cast<const uint16_t*>(dx16),
                                   dx_pad_.data(), n * XSize(), c.stream()));
  return CropGradient(c, dx_pad_.data(), dx, n);
}

absl::Status GpuConv::SetBatch(GpuContext& c, int64_t n) {
  if (n == n_) return absl::OkStatus();
  RETURN_IF_ERROR(
      x_desc_.Set(n, in_.c, in_.h + extra_h_, in_.w + extra_w_, DataType()));
  RETURN_IF_ERROR(y_desc_.Set(n, out_, oh_, ow_, DataType()));
  RETURN_IF_ERROR(y32_desc_.Set(n, out_, oh_, ow_));
  ASSIGN_OR_RETURN(algo_, gpu_layers::ChooseConvAlgorithms(
                              c, x_desc_.get(), w_desc_.get(), conv_,
                              y_desc_.get(), bf16_, Name()));
  n_ = n;
  return absl::OkStatus();
}

}  // namespace cohort
