#include "worker/layers/attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace cohort {

template <typename T>
std::string Attention<T>::Name() const {
  return absl::StrCat(
      "attention(", dim_ > 0 ? absl::StrCat(dim_) : "?", ", heads ",
      options_.heads, ", ", options_.causal ? "causal" : "bidirectional",
      options_.dropout > 0 ? absl::StrCat(", dropout ", options_.dropout) : "",
      ")");
}

template <typename T>
absl::StatusOr<Shape> Attention<T>::Configure(const Shape& in) {
  if (in.size() != 2 || in[0] < 1 || in[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention: expected a per-sample sequence [D, L], got ",
                     ShapeString(in)));
  }
  if (options_.heads < 1 || in[0] % options_.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention: heads (", options_.heads,
                     ") must be positive and divide the features D (", in[0],
                     ") of ", ShapeString(in)));
  }
  if (!(options_.dropout >= 0.0 && options_.dropout < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention: dropout must be in [0, 1), got ", options_.dropout));
  }
  dim_ = in[0];
  length_ = in[1];
  return in;
}

template <typename T>
std::vector<ParamDecl> Attention<T>::Params() const {
  using Init = ParamDecl::Init;
  const int64_t d = dim_;
  return {{"in_proj_weight", {3 * d, d}, Init::kNormal, d, 0.02},
          {"in_proj_bias", {3 * d}, Init::kZeros, d, 0.02},
          {"out_proj.weight", {d, d}, Init::kNormal, d, 0.02},
          {"out_proj.bias", {d}, Init::kZeros, d, 0.02}};
}

template <typename T>
void Attention<T>::Bind(std::vector<BasicTensor<T>> values,
                        std::vector<BasicTensor<T>> grads) {
  CHECK(values.size() == 4 && grads.size() == 4) << Name() << ": Bind";
  w_in_ = std::move(values[0]);
  b_in_ = std::move(values[1]);
  w_out_ = std::move(values[2]);
  b_out_ = std::move(values[3]);
  dw_in_ = std::move(grads[0]);
  db_in_ = std::move(grads[1]);
  dw_out_ = std::move(grads[2]);
  db_out_ = std::move(grads[3]);
}

// Two 32-bit uniforms per 64-bit draw (as the dropout layer); only the
// entries the kernel reads are drawn (j <= i when causal).
template <typename T>
void Attention<T>::DrawKeep(const AttentionDims& d) {
  const int64_t len = d.length;
  keep_.resize(d.batch * d.heads * len * len);
  const uint64_t threshold =
      static_cast<uint64_t>(std::ldexp(options_.dropout, 32));
  uint64_t word = 0;
  bool half = false;  // `word`'s high half is still unused
  for (int64_t row = 0; row < d.batch * d.heads * len; ++row) {
    uint8_t* k = keep_.data() + row * len;
    const int64_t count = d.causal ? row % len + 1 : len;
    for (int64_t j = 0; j < count; ++j) {
      uint64_t u;
      if (half) {
        u = word >> 32;
        half = false;
      } else {
        word = rng_();
        u = word & 0xffffffffu;
        half = true;
      }
      k[j] = u >= threshold;
    }
  }
}

template <typename T>
double Attention<T>::KeptFraction() const {
  if (!dropped_) return 1.0;
  const int64_t len = dims_.length;
  int64_t kept = 0, drawn = 0;
  for (int64_t row = 0; row < dims_.batch * dims_.heads * len; ++row) {
    const int64_t count = dims_.causal ? row % len + 1 : len;
    for (int64_t j = 0; j < count; ++j) kept += keep_[row * len + j];
    drawn += count;
  }
  return static_cast<double>(kept) / static_cast<double>(drawn);
}

template <typename T>
void Attention<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                           Mode mode) {
  CHECK(in.rank() == 3 && in.dim(0) == dim_ && in.dim(2) == length_)
      << Name() << ": input " << ShapeString(in.shape())
      << " is not [D, N, L] for the configured [D, L]";
  const int64_t n = in.dim(1), d = dim_, nl = n * length_;
  // The internal buffers' rows are padded (see kernels/attention.h).
  const int64_t ld = AttentionStride(nl);
  in_ = &in;
  dims_ = {n, length_, d, options_.heads, options_.causal, ld};
  EnsureShape(&qkv_, {3 * d, ld});
  BroadcastColumn<T>(3 * d, nl, b_in_.data(), qkv_.data(), ld);
  Gemm<T>(Trans::kNo, Trans::kNo, 3 * d, nl, d, T(1), w_in_.data(), d,
          in.data(), nl, T(1), qkv_.data(), ld);
  dropped_ = mode == Mode::kTrain && options_.dropout > 0.0;
  if (dropped_) DrawKeep(dims_);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - options_.dropout));
  EnsureShape(&heads_, {d, ld});
  AttentionForward<T>(dims_, qkv_.data(), dropped_ ? keep_.data() : nullptr,
                      keep_scale, heads_.data(), &cache_);
  EnsureShape(out, {d, n, length_});
  if (!defer_bias_) BroadcastColumn<T>(d, nl, b_out_.data(), out->data(), nl);
  Gemm<T>(Trans::kNo, Trans::kNo, d, nl, d, T(1), w_out_.data(), d,
          heads_.data(), ld, defer_bias_ ? T(0) : T(1), out->data(), nl);
}

template <typename T>
void Attention<T>::Backward(const BasicTensor<T>& grad_out,
                            BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  const int64_t d = dim_, nl = dims_.batch * length_, ld = dims_.stride;
  const T* dy = grad_out.data();
  // Out-projection: dWo = dY heads^T, dbo = row sums, dheads = Wo^T dY.
  Gemm<T>(Trans::kNo, Trans::kYes, d, d, nl, T(1), dy, nl, heads_.data(), ld,
          T(0), dw_out_.data(), d);
  RowSums<T>(d, nl, dy, nl, db_out_.data());
  EnsureShape(&grad_heads_, heads_.shape());
  Gemm<T>(Trans::kYes, Trans::kNo, d, nl, d, T(1), w_out_.data(), d, dy, nl,
          T(0), grad_heads_.data(), ld);
  EnsureShape(&grad_qkv_, qkv_.shape());
  const T keep_scale = static_cast<T>(1.0 / (1.0 - options_.dropout));
  AttentionBackward<T>(dims_, qkv_.data(), dropped_ ? keep_.data() : nullptr,
                       keep_scale, grad_heads_.data(), grad_qkv_.data(),
                       &cache_);
  // In-projection.
  Gemm<T>(Trans::kNo, Trans::kYes, 3 * d, d, nl, T(1), grad_qkv_.data(), ld,
          in_->data(), nl, T(0), dw_in_.data(), d);
  RowSums<T>(3 * d, nl, grad_qkv_.data(), ld, db_in_.data());
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_->shape());
  Gemm<T>(Trans::kYes, Trans::kNo, d, nl, 3 * d, T(1), w_in_.data(), d,
          grad_qkv_.data(), ld, T(0), grad_in->data(), nl);
}

template class Attention<float>;
template class Attention<double>;

}  // namespace cohort
