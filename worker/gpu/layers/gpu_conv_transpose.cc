#include "worker/gpu/layers/gpu_conv_transpose.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/ops.h"

namespace cohort {

using gpu_layers::kOne;
using gpu_layers::kZero;

GpuConvTranspose::~GpuConvTranspose() {
  if (conv_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_);
}

std::string GpuConvTranspose::Name() const {
  return absl::StrCat("conv_transpose2d(", in_.c, "->", o_.out_channels, ", k",
                      o_.kernel,
                      o_.stride > 1 ? absl::StrCat(", s", o_.stride) : "",
                      o_.groups > 1 ? absl::StrCat(", g", o_.groups) : "",
                      bf16_ ? ", bf16)" : ")");
}

absl::StatusOr<Shape> GpuConvTranspose::Configure(const Shape& in) {
  const GpuConvTransposeOptions& o = o_;
  if (in.size() != 3 || o.out_channels < 1 || o.kernel < 1 || o.stride < 1 ||
      o.padding < 0 || o.output_padding < 0 || o.output_padding >= o.stride ||
      o.groups < 1 || in[0] % o.groups != 0 || o.out_channels % o.groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": cannot take input ", ShapeString(in)));
  }
  in_ = gpu_layers::AsChw(in);
  oh_ = (in_.h - 1) * o.stride - 2 * o.padding + o.kernel + o.output_padding;
  ow_ = (in_.w - 1) * o.stride - 2 * o.padding + o.kernel + o.output_padding;
  if (oh_ < 1 || ow_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": padding ", o.padding, " leaves no output of ",
                     ShapeString(in)));
  }
  RETURN_IF_ERROR(CudnnStatus(cudnnCreateConvolutionDescriptor(&conv_),
                              "cudnnCreateConvolutionDescriptor"));
  // The compute type is float32 in both precisions.
  RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolution2dDescriptor(conv_, o.padding, o.padding, o.stride,
                                      o.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT),
      "convolution descriptor"));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolutionGroupCount(conv_, static_cast<int>(o.groups)),
      "convolution group count"));
  RETURN_IF_ERROR(
      CudnnStatus(cudnnSetConvolutionMathType(
                      conv_, bf16_ ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                  "convolution math type"));
  // The convolution's filter: its output channels are this layer's input.
  RETURN_IF_ERROR(w_desc_.Set(in_.c, o.out_channels / o.groups, o.kernel,
                              o.kernel, DataType()));
  RETURN_IF_ERROR(b_desc_.Set(1, o.out_channels, 1, 1));
  return Shape{o.out_channels, oh_, ow_};
}

std::vector<int64_t> GpuConvTranspose::ParamSizes() const {
  if (o_.bias) return {WeightSize(), o_.out_channels};
  return {WeightSize()};
}

void GpuConvTranspose::Bind(const std::vector<float*>& v,
                            const std::vector<float*>& g) {
  w_ = v[0];
  dw_ = g[0];
  if (o_.bias) {
    b_ = v[1];
    db_ = g[1];
  }
}

absl::Status GpuConvTranspose::Forward(GpuContext& c, const float* in,
                                       float* out, int64_t n, Mode) {
  RETURN_IF_ERROR(SetBatch(c, n));
  in_ptr_ = in;
  ASSIGN_OR_RETURN(void* ws, c.Workspace(algo_.workspace));
  if (bf16_) {
    RETURN_IF_ERROR(ForwardBf16(c, in, out, ws));
  } else {
    RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardData(
            c.cudnn(), &kOne, w_desc_.get(), w_, in_desc_.get(), in, conv_,
            algo_.data, ws, algo_.workspace, &kZero, out_desc_.get(), out),
        absl::StrCat(Name(), " forward")));
  }
  if (!o_.bias) return absl::OkStatus();
  return CudnnStatus(cudnnAddTensor(c.cudnn(), &kOne, b_desc_.get(), b_, &kOne,
                                    out32_desc_.get(), out),
                     absl::StrCat(Name(), " bias"));
}

absl::Status GpuConvTranspose::ForwardBf16(GpuContext& c, const float* in,
                                           float* out, void* ws) {
  const int64_t n = n_;
  RETURN_IF_ERROR(gpu_layers::ToBf16(c, in, n * InSize(), x16_));
  RETURN_IF_ERROR(gpu_layers::ToBf16(c, w_, WeightSize(), w16_));
  ASSIGN_OR_RETURN(void* y16, c.Scratch(GpuContext::Slot::kLowpA,
                                        n * OutSize() * sizeof(uint16_t)));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardData(c.cudnn(), &kOne, w_desc_.get(),
                                   w16_.halves(), in_desc_.get(), x16_.halves(),
                                   conv_, algo_.data, ws, algo_.workspace,
                                   &kZero, out_desc_.get(), y16),
      absl::StrCat(Name(), " forward")));
  return gpu::Bf16ToFloat(static_cast<const uint16_t*>(y16), out, n * OutSize(),
                          c.stream());
}

absl::Status GpuConvTranspose::Backward(GpuContext& c, const float* dy,
                                        float* dx) {
  if (o_.bias) {
    RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardBias(c.cudnn(), &kOne, out32_desc_.get(), dy,
                                     &kZero, b_desc_.get(), db_),
        absl::StrCat(Name(), " bias gradient")));
  }
  ASSIGN_OR_RETURN(void* ws, c.Workspace(algo_.workspace));
  if (bf16_) return BackwardBf16(c, dy, dx, ws);
  // The convolution's input is this layer's output gradient, its output
  // gradient this layer's input.
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(
          c.cudnn(), &kOne, out_desc_.get(), dy, in_desc_.get(), in_ptr_, conv_,
          algo_.filter, ws, algo_.workspace, &kZero, w_desc_.get(), dw_),
      absl::StrCat(Name(), " weight gradient")));
  if (dx == nullptr) return absl::OkStatus();
  return CudnnStatus(
      cudnnConvolutionForward(c.cudnn(), &kOne, out_desc_.get(), dy,
                              w_desc_.get(), w_, conv_, algo_.forward, ws,
                              algo_.workspace, &kZero, in_desc_.get(), dx),
      absl::StrCat(Name(), " input gradient"));
}

absl::Status GpuConvTranspose::BackwardBf16(GpuContext& c, const float* dy,
                                            float* dx, void* ws) {
  const int64_t n = n_;
  ASSIGN_OR_RETURN(const uint16_t* dy16,
                   gpu_layers::ToBf16Scratch(c, dy, n * OutSize(),
                                             GpuContext::Slot::kLowpA));
  ASSIGN_OR_RETURN(void* dw16, c.Scratch(GpuContext::Slot::kLowpB,
                                         WeightSize() * sizeof(uint16_t)));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(c.cudnn(), &kOne, out_desc_.get(), dy16,
                                     in_desc_.get(), x16_.halves(), conv_,
                                     algo_.filter, ws, algo_.workspace, &kZero,
                                     w_desc_.get(), dw16),
      absl::StrCat(Name(), " weight gradient")));
  RETURN_IF_ERROR(gpu::Bf16ToFloat(static_cast<const uint16_t*>(dw16), dw_,
                                   WeightSize(), c.stream()));
  if (dx == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(void* dx16, c.Scratch(GpuContext::Slot::kLowpC,
                                         n * InSize() * sizeof(uint16_t)));
  RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionForward(c.cudnn(), &kOne, out_desc_.get(), dy16,
                              w_desc_.get(), w16_.halves(), conv_,
                              algo_.forward, ws, algo_.workspace, &kZero,
                              in_desc_.get(), dx16),
      absl::StrCat(Name(), " input gradient")));
  return gpu::Bf16ToFloat(static_cast<const uint16_t*>(dx16), dx, n * InSize(),
                          c.stream());
}

absl::Status GpuConvTranspose::SetBatch(GpuContext& c, int64_t n) {
  if (n == n_) return absl::OkStatus();
  RETURN_IF_ERROR(in_desc_.Set(n, in_.c, in_.h, in_.w, DataType()));
  RETURN_IF_ERROR(out_desc_.Set(n, o_.out_channels, oh_, ow_, DataType()));
  RETURN_IF_ERROR(out32_desc_.Set(n, o_.out_channels, oh_, ow_));
  // The convolution runs from this layer's output (x) to its input (y).
  ASSIGN_OR_RETURN(algo_, gpu_layers::ChooseConvAlgorithms(
                              c, out_desc_.get(), w_desc_.get(), conv_,
                              in_desc_.get(), bf16_, Name()));
  n_ = n;
  return absl::OkStatus();
}

}  // namespace cohort
