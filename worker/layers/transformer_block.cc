#include "worker/layers/transformer_block.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kernels/activations.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"

namespace cohort {
namespace {

NormOptions PerPosition(double eps) {
  NormOptions o;
  o.eps = eps;
  o.per_position = true;
  return o;
}

}  // namespace

template <typename T>
TransformerBlock<T>::TransformerBlock(TransformerBlockOptions o)
    : options_(o),
      ln1_(PerPosition(o.eps)),
      ln2_(PerPosition(o.eps)),
      attn_({o.heads, o.causal, o.dropout}),
      drop1_(o.dropout),
      drop2_(o.dropout) {
  // Without dropout both branches end in the residual sum, which adds the
  // out-projections' biases in its own pass (AddRowBias); the first MLP
  // product's bias goes into the GELU's pass. That saves a broadcast pass
  // and a read of the product's output per bias.
  attn_.set_output_bias_deferred(o.dropout == 0.0);
}

template <typename T>
std::string TransformerBlock<T>::Name() const {
  return absl::StrCat(
      "transformer_block(", dim_ > 0 ? absl::StrCat(dim_) : "?", ", heads ",
      options_.heads, ", mlp x", options_.mlp_ratio, ", ",
      options_.causal ? "causal" : "bidirectional",
      options_.dropout > 0 ? absl::StrCat(", dropout ", options_.dropout) : "",
      ")");
}

template <typename T>
absl::StatusOr<Shape> TransformerBlock<T>::Configure(const Shape& in) {
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer_block: ", parts...));
  };
  if (in.size() != 2 || in[0] < 1 || in[1] < 1) {
    return error("expected a per-sample sequence [D, L], got ",
                 ShapeString(in));
  }
  if (options_.heads < 1 || in[0] % options_.heads != 0) {
    return error("heads (", options_.heads,
                 ") must be positive and divide the features D (", in[0],
                 ") of ", ShapeString(in));
  }
  if (options_.mlp_ratio < 1) {
    return error("mlp_ratio must be at least 1, got ", options_.mlp_ratio);
  }
  if (!(options_.dropout >= 0.0 && options_.dropout < 1.0)) {
    return error("dropout must be in [0, 1), got ", options_.dropout);
  }
  for (Layer<T>* l : std::initializer_list<Layer<T>*>{&ln1_, &ln2_, &attn_,
                                                      &drop1_, &drop2_}) {
    absl::StatusOr<Shape> s = l->Configure(in);
    if (!s.ok()) return error(s.status().message());
  }
  dim_ = in[0];
  length_ = in[1];
  hidden_ = options_.mlp_ratio * dim_;
  return in;
}

template <typename T>
std::vector<ParamDecl> TransformerBlock<T>::Params() const {
  using Init = ParamDecl::Init;
  std::vector<ParamDecl> out;
  auto add = [&out](const char* prefix, std::vector<ParamDecl> decls) {
    for (ParamDecl& p : decls) {
      p.name = absl::StrCat(prefix, p.name);
      out.push_back(std::move(p));
    }
  };
  add("ln1.", ln1_.Params());
  add("attn.", attn_.Params());
  add("ln2.", ln2_.Params());
  const int64_t d = dim_, r = hidden_;
  out.push_back({"mlp.0.weight", {r, d}, Init::kNormal, d, 0.02});
  out.push_back({"mlp.0.bias", {r}, Init::kZeros, d, 0.02});
  out.push_back({"mlp.2.weight", {d, r}, Init::kNormal, r, 0.02});
  out.push_back({"mlp.2.bias", {d}, Init::kZeros, r, 0.02});
  return out;
}

template <typename T>
void TransformerBlock<T>::Bind(std::vector<BasicTensor<T>> values,
                               std::vector<BasicTensor<T>> grads) {
  CHECK(values.size() == 12 && grads.size() == 12) << Name() << ": Bind";
  auto take = [&](int64_t from, int64_t count, Layer<T>& layer) {
    std::vector<BasicTensor<T>> v, g;
    for (int64_t k = from; k < from + count; ++k) {
      v.push_back(std::move(values[k]));
      g.push_back(std::move(grads[k]));
    }
    layer.Bind(std::move(v), std::move(g));
  };
  take(0, 2, ln1_);
  take(2, 4, attn_);
  take(6, 2, ln2_);
  w1_ = std::move(values[8]);
  b1_ = std::move(values[9]);
  w2_ = std::move(values[10]);
  b2_ = std::move(values[11]);
  dw1_ = std::move(grads[8]);
  db1_ = std::move(grads[9]);
  dw2_ = std::move(grads[10]);
  db2_ = std::move(grads[11]);
}

template <typename T>
void TransformerBlock<T>::SeedRandom(uint64_t seed) {
  // Three independent streams from one seed (splitmix-style offsets).
  attn_.SeedRandom(seed);
  drop1_.SeedRandom(seed ^ 0x9e3779b97f4a7c15ull);
  drop2_.SeedRandom(seed ^ 0xbf58476d1ce4e5b9ull);
}

template <typename T>
void TransformerBlock<T>::Forward(const BasicTensor<T>& in, BasicTensor<T>* out,
                                  Mode mode) {
  CHECK(in.rank() == 3 && in.dim(0) == dim_ && in.dim(2) == length_)
      << Name() << ": input " << ShapeString(in.shape())
      << " is not [D, N, L] for the configured [D, L]";
  in_ = &in;
  const int64_t n = in.dim(1), m = n * length_, size = in.size();
  ln1_.Forward(in, &a_ln1_, mode);
  attn_.Forward(a_ln1_, &a_attn_, mode);
  // Without dropout the dropout layers would only copy: skipped, and the
  // residual sums add the branches' last biases (see the constructor).
  const bool drop = options_.dropout > 0.0;
  EnsureShape(&h_, in.shape());
  if (drop) {
    drop1_.Forward(a_attn_, &a_drop1_, mode);
    Add(in.data(), a_drop1_.data(), h_.data(), size);
  } else {
    AddRowBias(in.data(), a_attn_.data(), attn_.output_bias().data(), dim_, m,
               h_.data());
  }
  ln2_.Forward(h_, &a_ln2_, mode);
  // m1 holds the product without its bias, which the GELU adds.
  EnsureShape(&m1_, {hidden_, n, length_});
  PositionwiseLinear<T>(w1_.data(), nullptr, a_ln2_.data(), hidden_, dim_, m,
                        m1_.data());
  EnsureShape(&g_, m1_.shape());
  ActivationForwardRowBias<T>(ActivationKind::kGelu, T(0), m1_.data(),
                              b1_.data(), hidden_, m, g_.data());
  EnsureShape(&m2_, in.shape());
  PositionwiseLinear<T>(w2_.data(), drop ? b2_.data() : nullptr, g_.data(),
                        dim_, hidden_, m, m2_.data());
  EnsureShape(out, in.shape());
  if (drop) {
    drop2_.Forward(m2_, &a_drop2_, mode);
    Add(h_.data(), a_drop2_.data(), out->data(), size);
  } else {
    AddRowBias(h_.data(), m2_.data(), b2_.data(), dim_, m, out->data());
  }
}

template <typename T>
void TransformerBlock<T>::Backward(const BasicTensor<T>& grad_out,
                                   BasicTensor<T>* grad_in) {
  CHECK(in_ != nullptr) << Name() << ": Backward before Forward";
  CHECK_EQ(grad_out.size(), in_->size());
  const int64_t m = in_->dim(1) * length_, size = in_->size();
  // MLP branch: dy reaches m2 through its dropout.
  const bool drop = options_.dropout > 0.0;
  if (drop) drop2_.Backward(grad_out, &g_m2_);
  EnsureShape(&g_g_, g_.shape());
  PositionwiseLinearBackward(w2_.data(), g_.data(),
                             (drop ? g_m2_ : grad_out).data(), dim_, hidden_, m,
                             dw2_.data(), db2_.data(), g_g_.data());
  ActivationBackwardRowBias<T>(ActivationKind::kGelu, T(0), m1_.data(),
                               b1_.data(), hidden_, m, g_g_.data(),
                               g_g_.data());
  EnsureShape(&g_ln2_, in_->shape());
  PositionwiseLinearBackward(w1_.data(), a_ln2_.data(), g_g_.data(), hidden_,
                             dim_, m, dw1_.data(), db1_.data(), g_ln2_.data());
  ln2_.Backward(g_ln2_, &g_h_);
  Add(grad_out.data(), g_h_.data(), g_h_.data(), size);  // dh
  // Attention branch.
  if (drop) drop1_.Backward(g_h_, &g_attn_);
  attn_.Backward(drop ? g_attn_ : g_h_, &g_ln1_);
  ln1_.Backward(g_ln1_, &g_x_);
  if (grad_in == nullptr) return;
  EnsureShape(grad_in, in_->shape());
  Add(g_h_.data(), g_x_.data(), grad_in->data(), size);
}

template class TransformerBlock<float>;
template class TransformerBlock<double>;

}  // namespace cohort
