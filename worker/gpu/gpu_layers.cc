#include "worker/gpu/gpu_layers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/ops.h"

namespace cohort {
namespace {

const float kOne = 1.0f;
const float kZero = 0.0f;

int64_t Product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// {C, H, W} stays; {C, L} is a 1 x L image; {F} a 1 x 1 one.
struct Chw {
  int64_t c = 1, h = 1, w = 1;
};
Chw AsChw(const Shape& s) {
  if (s.size() == 3) return {s[0], s[1], s[2]};
  if (s.size() == 2) return {s[0], 1, s[1]};
  return {s.empty() ? 1 : s[0], 1, 1};
}

// RAII owners of cuDNN descriptors.
class TensorDesc {
 public:
  ~TensorDesc() {
    if (d_ != nullptr) cudnnDestroyTensorDescriptor(d_);
  }
  absl::Status Set(int64_t n, int64_t c, int64_t h, int64_t w,
                   cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    if (d_ == nullptr) {
      RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&d_),
                                  "cudnnCreateTensorDescriptor"));
    }
    return CudnnStatus(
        cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, type, n, c, h, w),
        absl::StrCat("tensor descriptor ", n, "x", c, "x", h, "x", w));
  }
  cudnnTensorDescriptor_t get() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

class FilterDesc {
 public:
  ~FilterDesc() {
    if (d_ != nullptr) cudnnDestroyFilterDescriptor(d_);
  }
  absl::Status Set(int64_t k, int64_t c, int64_t h, int64_t w,
                   cudnnDataType_t type) {
    if (d_ == nullptr) {
      RETURN_IF_ERROR(CudnnStatus(cudnnCreateFilterDescriptor(&d_),
                                  "cudnnCreateFilterDescriptor"));
    }
    return CudnnStatus(
        cudnnSetFilter4dDescriptor(d_, type, CUDNN_TENSOR_NCHW, k, c, h, w),
        "filter descriptor");
  }
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

// bf16 copies: float32 -> bf16 into `to` (grown as needed), and back.
absl::Status ToBf16(GpuContext& c, const float* from, int64_t n,
                    DeviceFloats& to) {
  RETURN_IF_ERROR(to.ReserveHalves(n));
  return gpu::FloatToBf16(from, to.halves(), n, c.stream());
}
absl::StatusOr<uint16_t*> ToBf16Scratch(GpuContext& c, const float* from,
                                        int64_t n, GpuContext::Slot slot) {
  ASSIGN_OR_RETURN(void* p, c.Scratch(slot, n * sizeof(uint16_t)));
  uint16_t* to = static_cast<uint16_t*>(p);
  RETURN_IF_ERROR(gpu::FloatToBf16(from, to, n, c.stream()));
  return to;
}

// Copies `n` floats device to device on the context's stream.
absl::Status CopyOnDevice(GpuContext& c, float* dst, const float* src,
                          int64_t n) {
  return CudaStatus(cudaMemcpyAsync(dst, src, n * sizeof(float),
                                    cudaMemcpyDeviceToDevice, c.stream()),
                    "device copy");
}

// ---------------------------------------------------------------- Linear

// y[N, O] = x[N, F] W[O, F]^T + b. cuBLAS is column-major, so every
// row-major matrix here is its transpose to cuBLAS.
//
// In bf16 the three products take bf16 copies of x, W and dy and write
// float32 results (cublasGemmEx, float32 accumulation); the bias stays in
// float32.
class GpuLinear : public GpuLayer {
 public:
  GpuLinear(int64_t out, bool bias, bool bf16)
      : out_(out), bias_(bias), bf16_(bf16) {}
  std::string Name() const override {
    return absl::StrCat("linear(", in_, "->", out_, bf16_ ? ", bf16)" : ")");
  }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    if (out_ < 1 || in.size() != 1 || in[0] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(Name(), ": expects a flat input {features} but got ",
                       ShapeString(in), "; put a flatten layer before it"));
    }
    in_ = in[0];
    return Shape{out_};
  }
  std::vector<int64_t> ParamSizes() const override {
    if (bias_) return {out_ * in_, out_};
    return {out_ * in_};
  }
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override {
    w_ = v[0];
    dw_ = g[0];
    if (bias_) {
      b_ = v[1];
      db_ = g[1];
    }
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override {
    in_ptr_ = in;
    n_ = n;
    if (bf16_) {
      RETURN_IF_ERROR(ToBf16(c, in, n * in_, x16_));
      RETURN_IF_ERROR(ToBf16(c, w_, out_ * in_, w16_));
      RETURN_IF_ERROR(Gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_,
                           w16_.halves(), in_, x16_.halves(), in_, out, out_,
                           "linear forward"));
    } else {
      RETURN_IF_ERROR(CublasStatus(
          cublasSgemm(c.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_, &kOne,
                      w_, in_, in, in_, &kZero, out, out_),
          "linear forward"));
    }
    if (!bias_) return absl::OkStatus();
    ASSIGN_OR_RETURN(const float* ones, c.Ones(n));
    return CublasStatus(
        cublasSger(c.cublas(), out_, n, &kOne, b_, 1, ones, 1, out, out_),
        "linear bias");
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    if (bias_) {
      ASSIGN_OR_RETURN(const float* ones, c.Ones(n_));
      RETURN_IF_ERROR(
          CublasStatus(cublasSgemv(c.cublas(), CUBLAS_OP_N, out_, n_, &kOne, dy,
                                   out_, ones, 1, &kZero, db_, 1),
                       "linear bias gradient"));
    }
    if (bf16_) return BackwardBf16(c, dy, dx);
    RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, &kOne,
                    in_ptr_, in_, dy, out_, &kZero, dw_, in_),
        "linear weight gradient"));
    if (dx == nullptr) return absl::OkStatus();
    return CublasStatus(
        cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, &kOne,
                    w_, in_, dy, out_, &kZero, dx, in_),
        "linear input gradient");
  }

 private:
  // c[m, n] (float32, column-major) = op(a) op(b) from bf16 operands.
  static absl::Status Gemm(GpuContext& c, cublasOperation_t ta,
                           cublasOperation_t tb, int64_t m, int64_t n,
                           int64_t k, const uint16_t* a, int64_t lda,
                           const uint16_t* b, int64_t ldb, float* out,
                           int64_t ldc, absl::string_view what) {
    return CublasStatus(
        cublasGemmEx(c.cublas_lowp(), ta, tb, m, n, k, &kOne, a, CUDA_R_16BF,
                     lda, b, CUDA_R_16BF, ldb, &kZero, out, CUDA_R_32F, ldc,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        what);
  }
  absl::Status BackwardBf16(GpuContext& c, const float* dy, float* dx) {
    ASSIGN_OR_RETURN(const uint16_t* dy16,
                     ToBf16Scratch(c, dy, n_ * out_, GpuContext::Slot::kLowpA));
    RETURN_IF_ERROR(Gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_,
                         x16_.halves(), in_, dy16, out_, dw_, in_,
                         "linear weight gradient"));
    if (dx == nullptr) return absl::OkStatus();
    return Gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, w16_.halves(), in_,
                dy16, out_, dx, in_, "linear input gradient");
  }

  const int64_t out_;
  const bool bias_, bf16_;
  int64_t in_ = 0;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
  int64_t n_ = 0;
  DeviceFloats x16_, w16_;  // bf16 copies kept from forward for backward
};

// ------------------------------------------------------------ Convolution

// Conv1d runs as a 2-D convolution over a 1 x L image.
//
// float32: FMA math, no TF32 (the CPU engine is the reference to 1e-5).
// bf16: cuDNN's pseudo-bf16 configuration (bf16 x, w and y, float32
// accumulation, tensor cores); the layer casts its float32 input and
// weights to bf16 copies kept for backward and casts the results (output,
// weight and input gradients) back to float32. The bias stays float32.
class GpuConv : public GpuLayer {
 public:
  GpuConv(int64_t out, int64_t kernel, int64_t stride, int64_t pad, bool bias,
          bool one_d, bool bf16)
      : out_(out),
        k_(kernel),
        stride_(stride),
        pad_(pad),
        bias_(bias),
        one_d_(one_d),
        bf16_(bf16) {}
  ~GpuConv() override {
    if (conv_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_);
  }
  std::string Name() const override {
    return absl::StrCat(one_d_ ? "conv1d(" : "conv2d(", in_.c, "->", out_,
                        ", k", k_, bf16_ ? ", bf16)" : ")");
  }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    const size_t dims = one_d_ ? 2 : 3;
    if (in.size() != dims || out_ < 1 || k_ < 1 || stride_ < 1 || pad_ < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Name(), ": cannot take input ", ShapeString(in)));
    }
    in_ = AsChw(in);
    const int64_t kh = one_d_ ? 1 : k_, ph = one_d_ ? 0 : pad_;
    const int64_t sh = one_d_ ? 1 : stride_;
    oh_ = (in_.h + 2 * ph - kh) / sh + 1;
    ow_ = (in_.w + 2 * pad_ - k_) / stride_ + 1;
    if (oh_ < 1 || ow_ < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(), ": input ", ShapeString(in), " is smaller than the kernel"));
    }
    RETURN_IF_ERROR(CudnnStatus(cudnnCreateConvolutionDescriptor(&conv_),
                                "cudnnCreateConvolutionDescriptor"));
    // The compute type is float32 in both precisions.
    RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolution2dDescriptor(
                                    conv_, ph, pad_, sh, stride_, 1, 1,
                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                                "convolution descriptor"));
    RETURN_IF_ERROR(
        CudnnStatus(cudnnSetConvolutionMathType(
                        conv_, bf16_ ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                    "convolution math type"));
    RETURN_IF_ERROR(w_desc_.Set(out_, in_.c, kh, k_, DataType()));
    RETURN_IF_ERROR(b_desc_.Set(1, out_, 1, 1));
    if (one_d_) return Shape{out_, ow_};
    return Shape{out_, oh_, ow_};
  }
  std::vector<int64_t> ParamSizes() const override {
    if (bias_) return {WeightSize(), out_};
    return {WeightSize()};
  }
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override {
    w_ = v[0];
    dw_ = g[0];
    if (bias_) {
      b_ = v[1];
      db_ = g[1];
    }
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override {
    RETURN_IF_ERROR(SetBatch(c, n));
    in_ptr_ = in;
    ASSIGN_OR_RETURN(void* ws, c.Workspace(workspace_));
    const void* x = in;
    const void* w = w_;
    void* y = out;
    if (bf16_) {
      RETURN_IF_ERROR(ToBf16(c, in, n * InSize(), x16_));
      RETURN_IF_ERROR(ToBf16(c, w_, WeightSize(), w16_));
      ASSIGN_OR_RETURN(y, c.Scratch(GpuContext::Slot::kLowpA,
                                    n * OutSize() * sizeof(uint16_t)));
      x = x16_.halves();
      w = w16_.halves();
    }
    RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionForward(c.cudnn(), &kOne, x_desc_.get(), x,
                                w_desc_.get(), w, conv_, fwd_, ws, workspace_,
                                &kZero, y_desc_.get(), y),
        absl::StrCat(Name(), " forward")));
    if (bf16_) {
      RETURN_IF_ERROR(gpu::Bf16ToFloat(static_cast<const uint16_t*>(y), out,
                                       n * OutSize(), c.stream()));
    }
    if (!bias_) return absl::OkStatus();
    return CudnnStatus(cudnnAddTensor(c.cudnn(), &kOne, b_desc_.get(), b_,
                                      &kOne, y32_desc_.get(), out),
                       absl::StrCat(Name(), " bias"));
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    if (bias_) {
      RETURN_IF_ERROR(CudnnStatus(
          cudnnConvolutionBackwardBias(c.cudnn(), &kOne, y32_desc_.get(), dy,
                                       &kZero, b_desc_.get(), db_),
          absl::StrCat(Name(), " bias gradient")));
    }
    if (bf16_) return BackwardBf16(c, dy, dx);
    ASSIGN_OR_RETURN(void* ws, c.Workspace(workspace_));
    RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardFilter(
            c.cudnn(), &kOne, x_desc_.get(), in_ptr_, y_desc_.get(), dy, conv_,
            bwd_filter_, ws, workspace_, &kZero, w_desc_.get(), dw_),
        absl::StrCat(Name(), " weight gradient")));
    if (dx == nullptr) return absl::OkStatus();
    return CudnnStatus(
        cudnnConvolutionBackwardData(c.cudnn(), &kOne, w_desc_.get(), w_,
                                     y_desc_.get(), dy, conv_, bwd_data_, ws,
                                     workspace_, &kZero, x_desc_.get(), dx),
        absl::StrCat(Name(), " input gradient"));
  }

 private:
  cudnnDataType_t DataType() const {
    return bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  }
  int64_t WeightSize() const { return out_ * in_.c * (one_d_ ? 1 : k_) * k_; }
  int64_t InSize() const { return in_.c * in_.h * in_.w; }
  int64_t OutSize() const { return out_ * oh_ * ow_; }

  absl::Status BackwardBf16(GpuContext& c, const float* dy, float* dx) {
    const int64_t n = n_;
    ASSIGN_OR_RETURN(
        const uint16_t* dy16,
        ToBf16Scratch(c, dy, n * OutSize(), GpuContext::Slot::kLowpA));
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
    return gpu::Bf16ToFloat(static_cast<const uint16_t*>(dx16), dx,
                            n * InSize(), c.stream());
  }

  // Descriptors and algorithms for batches of `n` (chosen once per size).
  absl::Status SetBatch(GpuContext& c, int64_t n) {
    if (n == n_) return absl::OkStatus();
    RETURN_IF_ERROR(x_desc_.Set(n, in_.c, in_.h, in_.w, DataType()));
    RETURN_IF_ERROR(y_desc_.Set(n, out_, oh_, ow_, DataType()));
    RETURN_IF_ERROR(y32_desc_.Set(n, out_, oh_, ow_));
    RETURN_IF_ERROR(ChooseAlgorithms(c));
    n_ = n;
    return absl::OkStatus();
  }
  absl::Status ChooseAlgorithms(GpuContext& c);

  const int64_t out_, k_, stride_, pad_;
  const bool bias_, one_d_, bf16_;
  Chw in_;
  int64_t oh_ = 0, ow_ = 0, n_ = -1;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  // x and y in the layer's precision; y32 the float32 output (bias).
  TensorDesc x_desc_, y_desc_, y32_desc_, b_desc_;
  FilterDesc w_desc_;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  size_t workspace_ = 0;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
  DeviceFloats x16_, w16_;  // bf16 copies kept from forward for backward
};

// The fastest algorithm cuDNN's heuristics offer in the layer's math: plain
// FMA for float32, tensor cores allowed for bf16. Gradients prefer a
// deterministic algorithm, so that a step is reproducible run to run; bf16
// falls back to the fastest one when none is deterministic.
template <typename Perf>
absl::StatusOr<Perf> Pick(const Perf* perf, int count, bool deterministic,
                          bool bf16, absl::string_view what) {
  auto usable = [&](const Perf& p) {
    if (p.status != CUDNN_STATUS_SUCCESS) return false;
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
  workspace_ = std::max({fwd.memory, data.memory, filter.memory});
  return absl::OkStatus();
}

// ------------------------------------------------------------------ ReLU

class GpuRelu : public GpuLayer {
 public:
  ~GpuRelu() override {
    if (act_ != nullptr) cudnnDestroyActivationDescriptor(act_);
  }
  std::string Name() const override { return "relu"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    size_ = Product(in);
    RETURN_IF_ERROR(CudnnStatus(cudnnCreateActivationDescriptor(&act_),
                                "cudnnCreateActivationDescriptor"));
    RETURN_IF_ERROR(
        CudnnStatus(cudnnSetActivationDescriptor(act_, CUDNN_ACTIVATION_RELU,
                                                 CUDNN_NOT_PROPAGATE_NAN, 0.0),
                    "relu descriptor"));
    return in;
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override {
    if (n != n_) {
      RETURN_IF_ERROR(desc_.Set(n, size_, 1, 1));
      n_ = n;
    }
    in_ = in;
    out_ = out;
    return CudnnStatus(
        cudnnActivationForward(c.cudnn(), act_, &kOne, desc_.get(), in, &kZero,
                               desc_.get(), out),
        "relu forward");
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    if (dx == nullptr) return absl::OkStatus();
    return CudnnStatus(
        cudnnActivationBackward(c.cudnn(), act_, &kOne, desc_.get(), out_,
                                desc_.get(), dy, desc_.get(), in_, &kZero,
                                desc_.get(), dx),
        "relu backward");
  }

 private:
  int64_t size_ = 0, n_ = -1;
  cudnnActivationDescriptor_t act_ = nullptr;
  TensorDesc desc_;
  const float* in_ = nullptr;
  const float* out_ = nullptr;
};

// --------------------------------------------------------------- Pooling

// MaxPool2d, AvgPool2d (padding counted in the divisor, as the CPU engine
// and PyTorch do) and GlobalAvgPool (the whole image, output {C}).
class GpuPool : public GpuLayer {
 public:
  enum class Kind { kMax, kAvg, kGlobalAvg };
  GpuPool(Kind kind, int64_t kernel, int64_t stride, int64_t pad)
      : kind_(kind), k_(kernel), stride_(stride), pad_(pad) {}
  ~GpuPool() override {
    if (pool_ != nullptr) cudnnDestroyPoolingDescriptor(pool_);
  }
  std::string Name() const override {
    switch (kind_) {
      case Kind::kMax:
        return absl::StrCat("maxpool2d(k", k_, ")");
      case Kind::kAvg:
        return absl::StrCat("avgpool2d(k", k_, ")");
      default:
        return "global_avgpool";
    }
  }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    if (in.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(Name(), ": expects {channels, height, width}, got ",
                       ShapeString(in)));
    }
    in_ = AsChw(in);
    int64_t kh = k_, kw = k_, sh = stride_, sw = stride_, p = pad_;
    if (kind_ == Kind::kGlobalAvg) {
      kh = sh = in_.h;
      kw = sw = in_.w;
      p = 0;
    }
    if (kh < 1 || sh < 1 || p < 0 || 2 * p > kh) {
      return absl::InvalidArgumentError(
          absl::StrCat(Name(), ": bad kernel, stride or padding"));
    }
    oh_ = (in_.h + 2 * p - kh) / sh + 1;
    ow_ = (in_.w + 2 * p - kw) / sw + 1;
    if (oh_ < 1 || ow_ < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(), ": input ", ShapeString(in), " is smaller than the window"));
    }
    RETURN_IF_ERROR(CudnnStatus(cudnnCreatePoolingDescriptor(&pool_),
                                "cudnnCreatePoolingDescriptor"));
    const cudnnPoolingMode_t mode =
        kind_ == Kind::kMax ? CUDNN_POOLING_MAX_DETERMINISTIC
                            : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    RETURN_IF_ERROR(CudnnStatus(
        cudnnSetPooling2dDescriptor(pool_, mode, CUDNN_NOT_PROPAGATE_NAN, kh,
                                    kw, p, p, sh, sw),
        "pooling descriptor"));
    if (kind_ == Kind::kGlobalAvg) return Shape{in_.c};
    return Shape{in_.c, oh_, ow_};
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override {
    if (n != n_) {
      RETURN_IF_ERROR(x_desc_.Set(n, in_.c, in_.h, in_.w));
      RETURN_IF_ERROR(y_desc_.Set(n, in_.c, oh_, ow_));
      n_ = n;
    }
    in_ptr_ = in;
    out_ptr_ = out;
    return CudnnStatus(
        cudnnPoolingForward(c.cudnn(), pool_, &kOne, x_desc_.get(), in, &kZero,
                            y_desc_.get(), out),
        absl::StrCat(Name(), " forward"));
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    if (dx == nullptr) return absl::OkStatus();
    return CudnnStatus(
        cudnnPoolingBackward(c.cudnn(), pool_, &kOne, y_desc_.get(), out_ptr_,
                             y_desc_.get(), dy, x_desc_.get(), in_ptr_, &kZero,
                             x_desc_.get(), dx),
        absl::StrCat(Name(), " backward"));
  }

 private:
  const Kind kind_;
  const int64_t k_, stride_, pad_;
  Chw in_;
  int64_t oh_ = 0, ow_ = 0, n_ = -1;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  TensorDesc x_desc_, y_desc_;
  const float* in_ptr_ = nullptr;
  const float* out_ptr_ = nullptr;
};

// --------------------------------------------------------------- Flatten

// NCHW is already PyTorch's (C, H, W) feature order: a copy.
class GpuFlatten : public GpuLayer {
 public:
  std::string Name() const override { return "flatten"; }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    size_ = Product(in);
    return Shape{size_};
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode) override {
    n_ = n;
    return CopyOnDevice(c, out, in, n * size_);
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    if (dx == nullptr) return absl::OkStatus();
    return CopyOnDevice(c, dx, dy, n_ * size_);
  }

 private:
  int64_t size_ = 0, n_ = 0;
};

// --------------------------------------------------------------- Dropout

// Inverted dropout with a counter-based mask (kernels/cuda/dropout_rng.h):
// each training forward takes the next range of counters, and backward
// regenerates the same mask instead of storing it. The masks are not the
// CPU layer's (its generator is a Mersenne twister), so GPU and CPU runs
// with dropout agree in distribution, not element by element.
class GpuDropout : public GpuLayer {
 public:
  explicit GpuDropout(double p) : p_(p) {}
  std::string Name() const override {
    return absl::StrCat("dropout(", p_, ")");
  }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    if (!(p_ >= 0.0 && p_ < 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Name(), ": p must be in [0, 1)"));
    }
    size_ = Product(in);
    return in;
  }
  void SeedRandom(uint64_t seed) override { seed_ = seed; }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override {
    count_ = n * size_;
    train_ = mode == Mode::kTrain && p_ > 0;
    if (!train_) return CopyOnDevice(c, out, in, count_);
    offset_ = next_offset_;
    next_offset_ += count_;
    return gpu::DropoutForward(in, out, nullptr, count_, p_, seed_, offset_,
                               c.stream());
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    if (dx == nullptr) return absl::OkStatus();
    if (!train_) return CopyOnDevice(c, dx, dy, count_);
    return gpu::DropoutBackward(dy, dx, count_, p_, seed_, offset_, c.stream());
  }

 private:
  const double p_;
  int64_t size_ = 0, count_ = 0;
  bool train_ = false;
  uint64_t seed_ = 0, offset_ = 0, next_offset_ = 0;
};

// ------------------------------------------------------------- BatchNorm

// Per-channel statistics over the batch and the spatial positions (cuDNN's
// spatial mode), for {F} (BatchNorm1d over features), {C, L} and {C, H, W}.
// The running variance is updated with the unbiased batch variance, as
// PyTorch and the CPU engine do.
class GpuBatchNorm : public GpuLayer {
 public:
  GpuBatchNorm(const BatchNormSpec& s, bool two_d)
      : eps_(s.eps() > 0 ? s.eps() : 1e-5),
        momentum_(s.momentum() > 0 ? s.momentum() : 0.1),
        two_d_(two_d) {}
  std::string Name() const override {
    return absl::StrCat(two_d_ ? "batchnorm2d(" : "batchnorm1d(", in_.c, ")");
  }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    const bool fits =
        two_d_ ? in.size() == 3 : (in.size() == 1 || in.size() == 2);
    if (!fits || eps_ < CUDNN_BN_MIN_EPSILON) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(), ": cannot take input ", ShapeString(in),
          " (or eps below cuDNN's minimum ", CUDNN_BN_MIN_EPSILON, ")"));
    }
    in_ = AsChw(in);
    RETURN_IF_ERROR(stat_desc_.Set(1, in_.c, 1, 1));
    RETURN_IF_ERROR(running_mean_.Reserve(in_.c));
    RETURN_IF_ERROR(running_var_.Reserve(in_.c));
    RETURN_IF_ERROR(save_mean_.Reserve(in_.c));
    RETURN_IF_ERROR(save_invstd_.Reserve(in_.c));
    // Running mean 0, variance 1, as a fresh PyTorch layer.
    std::vector<float> zeros(in_.c, 0.0f), ones(in_.c, 1.0f);
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy(running_mean_.data(), zeros.data(),
                              in_.c * sizeof(float), cudaMemcpyHostToDevice),
                   "batchnorm running mean"));
    RETURN_IF_ERROR(
        CudaStatus(cudaMemcpy(running_var_.data(), ones.data(),
                              in_.c * sizeof(float), cudaMemcpyHostToDevice),
                   "batchnorm running variance"));
    return in;
  }
  std::vector<int64_t> ParamSizes() const override { return {in_.c, in_.c}; }
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override {
    gamma_ = v[0];
    beta_ = v[1];
    dgamma_ = g[0];
    dbeta_ = g[1];
  }
  std::vector<std::pair<float*, int64_t>> Buffers() override {
    return {{running_mean_.data(), in_.c}, {running_var_.data(), in_.c}};
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override {
    if (n != n_) {
      RETURN_IF_ERROR(desc_.Set(n, in_.c, in_.h, in_.w));
      n_ = n;
    }
    in_ptr_ = in;
    if (mode == Mode::kEval) {
      return CudnnStatus(
          cudnnBatchNormalizationForwardInference(
              c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, desc_.get(),
              in, desc_.get(), out, stat_desc_.get(), gamma_, beta_,
              running_mean_.data(), running_var_.data(), eps_),
          absl::StrCat(Name(), " inference"));
    }
    return CudnnStatus(
        cudnnBatchNormalizationForwardTraining(
            c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, desc_.get(), in,
            desc_.get(), out, stat_desc_.get(), gamma_, beta_, momentum_,
            running_mean_.data(), running_var_.data(), eps_, save_mean_.data(),
            save_invstd_.data()),
        absl::StrCat(Name(), " forward"));
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    // cuDNN always computes the input gradient; the first layer gets a
    // scratch buffer.
    float* target = dx;
    if (target == nullptr) {
      RETURN_IF_ERROR(scratch_.Reserve(n_ * in_.c * in_.h * in_.w));
      target = scratch_.data();
    }
    return CudnnStatus(
        cudnnBatchNormalizationBackward(
            c.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero,
            desc_.get(), in_ptr_, desc_.get(), dy, desc_.get(), target,
            stat_desc_.get(), gamma_, dgamma_, dbeta_, eps_, save_mean_.data(),
            save_invstd_.data()),
        absl::StrCat(Name(), " backward"));
  }

 private:
  const double eps_, momentum_;
  const bool two_d_;
  Chw in_;
  int64_t n_ = -1;
  TensorDesc desc_, stat_desc_;
  DeviceFloats running_mean_, running_var_, save_mean_, save_invstd_, scratch_;
  float *gamma_ = nullptr, *beta_ = nullptr;
  float *dgamma_ = nullptr, *dbeta_ = nullptr;
  const float* in_ptr_ = nullptr;
};

// -------------------------------------------------------------- Residual

// The CPU engine's residual blocks (worker/layers/residual.h), in their
// parameter order: stages of conv + BatchNorm (+ ReLU but for the last),
// then the shortcut (identity, or a 1x1 conv with the stride and a
// BatchNorm), the sum and a ReLU.
//   basic:      conv3x3(stride) | conv3x3             (out channels each)
//   bottleneck: conv1x1 (out/4) | conv3x3(stride) (out/4) | conv1x1 (out)
// The forward activations stay in the block for backward; the gradients
// between its parts live in the context's shared block slots, since no two
// blocks run backward at once.
class GpuResidual : public GpuLayer {
 public:
  GpuResidual(int64_t out, int64_t stride, bool bottleneck, bool bf16)
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
  std::string Name() const override {
    return absl::StrCat(bottleneck_ ? "bottleneck(" : "residual(", in_c_, "->",
                        out_, ", stride ", stride_, ")");
  }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    if (in.size() != 3 || out_ < 1 || stride_ < 1 ||
        (bottleneck_ && out_ % 4 != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Name(), ": expects {channels, height, width} and a positive stride",
          bottleneck_ ? " and out_channels a multiple of 4" : "", ", got ",
          ShapeString(in)));
    }
    in_c_ = in[0];
    in_size_ = Product(in);
    Shape shape = in;
    for (Stage& st : stages_) {
      ASSIGN_OR_RETURN(shape, st.conv->Configure(shape));
      RETURN_IF_ERROR(st.bn->Configure(shape).status());
      if (st.relu != nullptr)
        RETURN_IF_ERROR(st.relu->Configure(shape).status());
      st.size = Product(shape);
      widest_ = std::max(widest_, st.size);
    }
    RETURN_IF_ERROR(relu_out_.Configure(shape).status());
    out_size_ = Product(shape);
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
  std::vector<int64_t> ParamSizes() const override {
    std::vector<int64_t> sizes;
    for (const GpuLayer* l : Parts()) {
      for (int64_t s : l->ParamSizes()) sizes.push_back(s);
    }
    return sizes;
  }
  void Bind(const std::vector<float*>& v,
            const std::vector<float*>& g) override {
    size_t i = 0;
    for (GpuLayer* l : Parts()) {
      const size_t k = l->ParamSizes().size();
      l->Bind(std::vector<float*>(v.begin() + i, v.begin() + i + k),
              std::vector<float*>(g.begin() + i, g.begin() + i + k));
      i += k;
    }
  }
  std::vector<std::pair<float*, int64_t>> Buffers() override {
    std::vector<std::pair<float*, int64_t>> all;
    for (GpuLayer* l : Parts()) {
      for (auto b : l->Buffers()) all.push_back(b);
    }
    return all;
  }
  absl::Status Forward(GpuContext& c, const float* in, float* out, int64_t n,
                       Mode mode) override {
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
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
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
      ASSIGN_OR_RETURN(float* g_s1,
                       Floats(c, Slot::kBlockShort, n * out_size_));
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

 private:
  struct Stage {
    std::unique_ptr<GpuConv> conv;
    std::unique_ptr<GpuBatchNorm> bn;
    std::unique_ptr<GpuRelu> relu;  // null for the last stage
    int64_t size = 0;               // per-sample output size
    DeviceFloats a, b, r;           // conv, bn and relu outputs
  };
  void AddStage(int64_t out, int64_t k, int64_t stride, int64_t pad) {
    if (!stages_.empty()) stages_.back().relu = std::make_unique<GpuRelu>();
    Stage st;
    st.conv =
        std::make_unique<GpuConv>(out, k, stride, pad, false, false, bf16_);
    st.bn = std::make_unique<GpuBatchNorm>(BatchNormSpec(), true);
    stages_.push_back(std::move(st));
  }
  std::vector<GpuLayer*> Parts() const {
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
  static absl::StatusOr<float*> Floats(GpuContext& c, GpuContext::Slot slot,
                                       int64_t count) {
    ASSIGN_OR_RETURN(void* p, c.Scratch(slot, count * sizeof(float)));
    return static_cast<float*>(p);
  }
  absl::Status Reserve(int64_t n) {
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

  const int64_t out_, stride_;
  const bool bottleneck_, bf16_;
  int64_t in_c_ = 0, in_size_ = 0, out_size_ = 0, widest_ = 0, n_ = 0;
  std::vector<Stage> stages_;
  GpuRelu relu_out_;
  std::unique_ptr<GpuConv> down_conv_;
  std::unique_ptr<GpuBatchNorm> down_bn_;
  DeviceFloats sum_, s1_, s2_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGpuLayer(const LayerSpec& l,
                                                       Precision precision) {
  const bool bf16 = precision == BF16;
  switch (l.kind_case()) {
    case LayerSpec::kLinear:
      return std::make_unique<GpuLinear>(l.linear().out_features(),
                                         !l.linear().no_bias(), bf16);
    case LayerSpec::kConv1D:
    case LayerSpec::kConv2D: {
      const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
      return std::make_unique<GpuConv>(
          c.out_channels(), c.kernel(), c.stride() > 0 ? c.stride() : 1,
          c.padding(), !c.no_bias(), l.has_conv1d(), bf16);
    }
    case LayerSpec::kBatchnorm1D:
      return std::make_unique<GpuBatchNorm>(l.batchnorm1d(), false);
    case LayerSpec::kBatchnorm2D:
      return std::make_unique<GpuBatchNorm>(l.batchnorm2d(), true);
    case LayerSpec::kRelu:
      return std::make_unique<GpuRelu>();
    case LayerSpec::kMaxpool2D:
    case LayerSpec::kAvgpool2D: {
      const PoolSpec& p = l.has_maxpool2d() ? l.maxpool2d() : l.avgpool2d();
      return std::make_unique<GpuPool>(
          l.has_maxpool2d() ? GpuPool::Kind::kMax : GpuPool::Kind::kAvg,
          p.kernel(), p.stride() > 0 ? p.stride() : p.kernel(), p.padding());
    }
    case LayerSpec::kGlobalAvgpool:
      return std::make_unique<GpuPool>(GpuPool::Kind::kGlobalAvg, 0, 0, 0);
    case LayerSpec::kFlatten:
      return std::make_unique<GpuFlatten>();
    case LayerSpec::kResidual:
      return std::make_unique<GpuResidual>(
          l.residual().out_channels(),
          l.residual().stride() > 0 ? l.residual().stride() : 1,
          l.residual().bottleneck(), bf16);
    case LayerSpec::kDropout:
      return std::make_unique<GpuDropout>(l.dropout().p());
    case LayerSpec::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("a model layer names no layer kind");
}

}  // namespace cohort
