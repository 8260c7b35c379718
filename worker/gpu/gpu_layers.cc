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
  absl::Status Set(int64_t n, int64_t c, int64_t h, int64_t w) {
    if (d_ == nullptr) {
      RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&d_),
                                  "cudnnCreateTensorDescriptor"));
    }
    return CudnnStatus(
        cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n,
                                   c, h, w),
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
  absl::Status Set(int64_t k, int64_t c, int64_t h, int64_t w) {
    if (d_ == nullptr) {
      RETURN_IF_ERROR(CudnnStatus(cudnnCreateFilterDescriptor(&d_),
                                  "cudnnCreateFilterDescriptor"));
    }
    return CudnnStatus(cudnnSetFilter4dDescriptor(
                           d_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, h, w),
                       "filter descriptor");
  }
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_ = nullptr;
};

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
class GpuLinear : public GpuLayer {
 public:
  GpuLinear(int64_t out, bool bias) : out_(out), bias_(bias) {}
  std::string Name() const override {
    return absl::StrCat("linear(", in_, "->", out_, ")");
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
    RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(c.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_, &kOne,
                    w_, in_, in, in_, &kZero, out, out_),
        "linear forward"));
    if (!bias_) return absl::OkStatus();
    ASSIGN_OR_RETURN(const float* ones, c.Ones(n));
    return CublasStatus(
        cublasSger(c.cublas(), out_, n, &kOne, b_, 1, ones, 1, out, out_),
        "linear bias");
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n_, &kOne,
                    in_ptr_, in_, dy, out_, &kZero, dw_, in_),
        "linear weight gradient"));
    if (bias_) {
      ASSIGN_OR_RETURN(const float* ones, c.Ones(n_));
      RETURN_IF_ERROR(
          CublasStatus(cublasSgemv(c.cublas(), CUBLAS_OP_N, out_, n_, &kOne, dy,
                                   out_, ones, 1, &kZero, db_, 1),
                       "linear bias gradient"));
    }
    if (dx == nullptr) return absl::OkStatus();
    return CublasStatus(
        cublasSgemm(c.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, n_, out_, &kOne,
                    w_, in_, dy, out_, &kZero, dx, in_),
        "linear input gradient");
  }

 private:
  const int64_t out_;
  const bool bias_;
  int64_t in_ = 0;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
  int64_t n_ = 0;
};

// ------------------------------------------------------------ Convolution

// Conv1d runs as a 2-D convolution over a 1 x L image.
class GpuConv : public GpuLayer {
 public:
  GpuConv(int64_t out, int64_t kernel, int64_t stride, int64_t pad, bool bias,
          bool one_d)
      : out_(out),
        k_(kernel),
        stride_(stride),
        pad_(pad),
        bias_(bias),
        one_d_(one_d) {}
  ~GpuConv() override {
    if (conv_ != nullptr) cudnnDestroyConvolutionDescriptor(conv_);
  }
  std::string Name() const override {
    return absl::StrCat(one_d_ ? "conv1d(" : "conv2d(", in_.c, "->", out_,
                        ", k", k_, ")");
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
    RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolution2dDescriptor(
                                    conv_, ph, pad_, sh, stride_, 1, 1,
                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                                "convolution descriptor"));
    // Plain float32 FMA, no TF32: the CPU engine is the reference.
    RETURN_IF_ERROR(
        CudnnStatus(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH),
                    "convolution math type"));
    RETURN_IF_ERROR(w_desc_.Set(out_, in_.c, kh, k_));
    RETURN_IF_ERROR(b_desc_.Set(1, out_, 1, 1));
    if (one_d_) return Shape{out_, ow_};
    return Shape{out_, oh_, ow_};
  }
  std::vector<int64_t> ParamSizes() const override {
    const int64_t w = out_ * in_.c * (one_d_ ? 1 : k_) * k_;
    if (bias_) return {w, out_};
    return {w};
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
    RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionForward(c.cudnn(), &kOne, x_desc_.get(), in,
                                w_desc_.get(), w_, conv_, fwd_, ws, workspace_,
                                &kZero, y_desc_.get(), out),
        absl::StrCat(Name(), " forward")));
    if (!bias_) return absl::OkStatus();
    return CudnnStatus(cudnnAddTensor(c.cudnn(), &kOne, b_desc_.get(), b_,
                                      &kOne, y_desc_.get(), out),
                       absl::StrCat(Name(), " bias"));
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    ASSIGN_OR_RETURN(void* ws, c.Workspace(workspace_));
    if (bias_) {
      RETURN_IF_ERROR(CudnnStatus(
          cudnnConvolutionBackwardBias(c.cudnn(), &kOne, y_desc_.get(), dy,
                                       &kZero, b_desc_.get(), db_),
          absl::StrCat(Name(), " bias gradient")));
    }
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
  // Descriptors and algorithms for batches of `n` (chosen once per size).
  absl::Status SetBatch(GpuContext& c, int64_t n) {
    if (n == n_) return absl::OkStatus();
    RETURN_IF_ERROR(x_desc_.Set(n, in_.c, in_.h, in_.w));
    RETURN_IF_ERROR(y_desc_.Set(n, out_, oh_, ow_));
    RETURN_IF_ERROR(ChooseAlgorithms(c));
    n_ = n;
    return absl::OkStatus();
  }
  absl::Status ChooseAlgorithms(GpuContext& c);

  const int64_t out_, k_, stride_, pad_;
  const bool bias_, one_d_;
  Chw in_;
  int64_t oh_ = 0, ow_ = 0, n_ = -1;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  TensorDesc x_desc_, y_desc_, b_desc_;
  FilterDesc w_desc_;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  size_t workspace_ = 0;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr;
  const float* in_ptr_ = nullptr;
};

// The fastest algorithm cuDNN's heuristics offer that runs in plain FMA
// math (and, for the gradients, deterministically, so that a step is
// reproducible run to run).
template <typename Perf>
absl::StatusOr<Perf> Pick(const Perf* perf, int count, bool deterministic,
                          absl::string_view what) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (perf[i].mathType != CUDNN_FMA_MATH &&
        perf[i].mathType != CUDNN_DEFAULT_MATH) {
      continue;
    }
    if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    return perf[i];
  }
  return absl::InternalError(
      absl::StrCat(what, ": cuDNN offers no float32 algorithm"));
}

absl::Status GpuConv::ChooseAlgorithms(GpuContext& c) {
  constexpr int kMax = 16;
  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t f[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                                  c.cudnn(), x_desc_.get(), w_desc_.get(),
                                  conv_, y_desc_.get(), kMax, &count, f),
                              "choosing a forward algorithm"));
  ASSIGN_OR_RETURN(auto fwd, Pick(f, count, false, Name()));
  cudnnConvolutionBwdDataAlgoPerf_t d[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                  c.cudnn(), w_desc_.get(), y_desc_.get(),
                                  conv_, x_desc_.get(), kMax, &count, d),
                              "choosing a backward-data algorithm"));
  ASSIGN_OR_RETURN(auto data, Pick(d, count, true, Name()));
  cudnnConvolutionBwdFilterAlgoPerf_t w[kMax];
  RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                  c.cudnn(), x_desc_.get(), y_desc_.get(),
                                  conv_, w_desc_.get(), kMax, &count, w),
                              "choosing a backward-filter algorithm"));
  ASSIGN_OR_RETURN(auto filter, Pick(w, count, true, Name()));
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

// out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), the CPU
// BasicBlock's structure and parameter order (conv1, bn1, conv2, bn2,
// downsample conv, downsample bn).
class GpuBasicBlock : public GpuLayer {
 public:
  GpuBasicBlock(int64_t out, int64_t stride)
      : out_(out),
        stride_(stride),
        conv1_(out, 3, stride, 1, false, false),
        bn1_(BatchNormSpec(), true),
        conv2_(out, 3, 1, 1, false, false),
        bn2_(BatchNormSpec(), true) {}
  std::string Name() const override {
    return absl::StrCat("residual(", in_c_, "->", out_, ", stride ", stride_,
                        ")");
  }
  absl::StatusOr<Shape> Configure(const Shape& in) override {
    if (in.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(Name(), ": expects {channels, height, width}, got ",
                       ShapeString(in)));
    }
    in_c_ = in[0];
    ASSIGN_OR_RETURN(const Shape a, conv1_.Configure(in));
    RETURN_IF_ERROR(bn1_.Configure(a).status());
    RETURN_IF_ERROR(relu1_.Configure(a).status());
    ASSIGN_OR_RETURN(out_shape_, conv2_.Configure(a));
    RETURN_IF_ERROR(bn2_.Configure(out_shape_).status());
    RETURN_IF_ERROR(relu2_.Configure(out_shape_).status());
    in_size_ = Product(in);
    out_size_ = Product(out_shape_);
    if (stride_ != 1 || in_c_ != out_) {
      down_conv_ = std::make_unique<GpuConv>(out_, 1, stride_, 0, false, false);
      down_bn_ = std::make_unique<GpuBatchNorm>(BatchNormSpec(), true);
      ASSIGN_OR_RETURN(const Shape s, down_conv_->Configure(in));
      RETURN_IF_ERROR(down_bn_->Configure(s).status());
    }
    return out_shape_;
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
    RETURN_IF_ERROR(conv1_.Forward(c, in, a1_.data(), n, mode));
    RETURN_IF_ERROR(bn1_.Forward(c, a1_.data(), b1_.data(), n, mode));
    RETURN_IF_ERROR(relu1_.Forward(c, b1_.data(), r1_.data(), n, mode));
    RETURN_IF_ERROR(conv2_.Forward(c, r1_.data(), a2_.data(), n, mode));
    RETURN_IF_ERROR(bn2_.Forward(c, a2_.data(), sum_.data(), n, mode));
    const float* shortcut = in;
    if (down_conv_ != nullptr) {
      RETURN_IF_ERROR(down_conv_->Forward(c, in, s1_.data(), n, mode));
      RETURN_IF_ERROR(down_bn_->Forward(c, s1_.data(), s2_.data(), n, mode));
      shortcut = s2_.data();
    }
    RETURN_IF_ERROR(CublasStatus(cublasSaxpy(c.cublas(), n * out_size_, &kOne,
                                             shortcut, 1, sum_.data(), 1),
                                 "residual sum"));
    return relu2_.Forward(c, sum_.data(), out, n, mode);
  }
  absl::Status Backward(GpuContext& c, const float* dy, float* dx) override {
    const int64_t n = n_;
    // g_sum is the gradient at the sum; it flows into both branches.
    RETURN_IF_ERROR(relu2_.Backward(c, dy, g_sum_.data()));
    RETURN_IF_ERROR(bn2_.Backward(c, g_sum_.data(), g_a2_.data()));
    RETURN_IF_ERROR(conv2_.Backward(c, g_a2_.data(), g_r1_.data()));
    RETURN_IF_ERROR(relu1_.Backward(c, g_r1_.data(), g_b1_.data()));
    RETURN_IF_ERROR(bn1_.Backward(c, g_b1_.data(), g_a1_.data()));
    // Parameter order puts the shortcut last, but its gradients do not
    // depend on the main branch's.
    if (down_conv_ != nullptr) {
      RETURN_IF_ERROR(down_bn_->Backward(c, g_sum_.data(), g_s1_.data()));
      RETURN_IF_ERROR(down_conv_->Backward(
          c, g_s1_.data(), dx == nullptr ? nullptr : g_in_.data()));
    }
    RETURN_IF_ERROR(conv1_.Backward(c, g_a1_.data(), dx));
    if (dx == nullptr) return absl::OkStatus();
    const float* other = down_conv_ != nullptr ? g_in_.data() : g_sum_.data();
    return CublasStatus(
        cublasSaxpy(c.cublas(), n * in_size_, &kOne, other, 1, dx, 1),
        "residual input gradient");
  }

 private:
  std::vector<GpuLayer*> Parts() const {
    std::vector<GpuLayer*> p = {
        const_cast<GpuConv*>(&conv1_), const_cast<GpuBatchNorm*>(&bn1_),
        const_cast<GpuConv*>(&conv2_), const_cast<GpuBatchNorm*>(&bn2_)};
    if (down_conv_ != nullptr) {
      p.push_back(down_conv_.get());
      p.push_back(down_bn_.get());
    }
    return p;
  }
  absl::Status Reserve(int64_t n) {
    for (DeviceFloats* b : {&a1_, &b1_, &r1_, &a2_, &sum_, &s1_, &s2_, &g_sum_,
                            &g_a2_, &g_r1_, &g_b1_, &g_a1_, &g_s1_}) {
      RETURN_IF_ERROR(b->Reserve(n * out_size_));
    }
    return g_in_.Reserve(n * in_size_);
  }

  const int64_t out_, stride_;
  int64_t in_c_ = 0, in_size_ = 0, out_size_ = 0, n_ = 0;
  Shape out_shape_;
  GpuConv conv1_;
  GpuBatchNorm bn1_;
  GpuRelu relu1_;
  GpuConv conv2_;
  GpuBatchNorm bn2_;
  GpuRelu relu2_;
  std::unique_ptr<GpuConv> down_conv_;
  std::unique_ptr<GpuBatchNorm> down_bn_;
  DeviceFloats a1_, b1_, r1_, a2_, sum_, s1_, s2_;
  DeviceFloats g_sum_, g_a2_, g_r1_, g_b1_, g_a1_, g_s1_, g_in_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGpuLayer(const LayerSpec& l) {
  switch (l.kind_case()) {
    case LayerSpec::kLinear:
      return std::make_unique<GpuLinear>(l.linear().out_features(),
                                         !l.linear().no_bias());
    case LayerSpec::kConv1D:
    case LayerSpec::kConv2D: {
      const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
      return std::make_unique<GpuConv>(
          c.out_channels(), c.kernel(), c.stride() > 0 ? c.stride() : 1,
          c.padding(), !c.no_bias(), l.has_conv1d());
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
      return std::make_unique<GpuBasicBlock>(
          l.residual().out_channels(),
          l.residual().stride() > 0 ? l.residual().stride() : 1);
    case LayerSpec::kDropout:
      return std::make_unique<GpuDropout>(l.dropout().p());
    case LayerSpec::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("a model layer names no layer kind");
}

}  // namespace cohort
