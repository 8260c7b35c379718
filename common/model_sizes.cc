#include "common/model_sizes.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checked_int.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"
#include "google/protobuf/descriptor.h"

namespace cohort {
namespace {

// One layer's inference: the per-sample output and the parameter tensors,
// or a reason the input does not fit (without the "layer I" prefix, which
// the caller adds).
struct Inferred {
  std::vector<CheckedInt> output;
  std::vector<CheckedInt> params;
  // Per parameter tensor, whether it is a bias or a norm parameter
  // (optimizer.no_decay_bias_and_norm); empty: derived from the layer kind
  // and the tensor names (weight, bias) in InferLayer.
  std::vector<bool> no_decay;
  // Per-sample elements held, when more than the output (residual blocks).
  std::optional<CheckedInt> activations;
};

absl::Status Unfit(absl::string_view why) {
  return absl::InvalidArgumentError(why);
}

CheckedInt Elements(const std::vector<CheckedInt>& dims) {
  CheckedInt n = 1;
  for (CheckedInt d : dims) n *= d;
  return n;
}

std::vector<CheckedInt> Checked(const Shape& s) {
  return std::vector<CheckedInt>(s.begin(), s.end());
}

// (padded - kernel) / stride + 1, where the kernel is known to fit.
CheckedInt Positions(CheckedInt padded, int64_t kernel, int64_t stride) {
  if (padded.overflow()) return padded;
  return CheckedInt((padded.value() - kernel) / stride + 1);
}

absl::StatusOr<Inferred> InferLinear(const LinearSpec& l, const Shape& in) {
  if (l.out_features() <= 0) {
    return Unfit(
        absl::StrCat("out_features must be positive, got ", l.out_features()));
  }
  if (in.size() != 1) {
    return Unfit(
        "it expects a flat input {features}; put a flatten layer "
        "before it");
  }
  Inferred r;
  r.output = {l.out_features()};
  r.params.push_back(CheckedInt(l.out_features()) * in[0]);
  if (!l.no_bias()) r.params.push_back(l.out_features());
  return r;
}

absl::StatusOr<Inferred> InferConv(const ConvSpec& c, int dims,
                                   const Shape& in) {
  const int64_t stride = c.stride() > 0 ? c.stride() : 1;
  const int64_t groups = c.groups() > 0 ? c.groups() : 1;
  const int64_t dilation = c.dilation() > 0 ? c.dilation() : 1;
  if (c.out_channels() <= 0 || c.kernel() <= 0 || c.stride() < 0 ||
      c.padding() < 0 || c.groups() < 0 || c.dilation() < 0) {
    return Unfit(absl::StrCat(
        "out_channels and kernel must be positive and stride, padding, "
        "groups and dilation not negative, got ",
        c.out_channels(), ", ", c.kernel(), ", ", c.stride(), ", ", c.padding(),
        ", ", c.groups(), " and ", c.dilation()));
  }
  if (in.size() != static_cast<size_t>(dims) + 1) {
    return Unfit(absl::StrCat("it expects a per-sample input ",
                              dims == 2 ? "{C, H, W}" : "{C, L}"));
  }
  if (in[0] % groups != 0 || c.out_channels() % groups != 0) {
    return Unfit(absl::StrCat("groups ", groups, " must divide the ", in[0],
                              " input and ", c.out_channels(),
                              " output channels"));
  }
  // The dilated kernel's extent; kernel and dilation are int32.
  const int64_t span = dilation * (int64_t{c.kernel()} - 1) + 1;
  Inferred r;
  r.output = {c.out_channels()};
  for (size_t d = 1; d < in.size(); ++d) {
    const CheckedInt padded = CheckedInt(in[d]) + CheckedInt(2) * c.padding();
    if (padded < CheckedInt(span)) {
      return Unfit(absl::StrCat("the input padded by ", c.padding(),
                                " is smaller than the kernel ", c.kernel(),
                                dilation > 1
                                    ? absl::StrCat(" dilated by ", dilation)
                                    : std::string()));
    }
    r.output.push_back(Positions(padded, span, stride));
  }
  CheckedInt weight = CheckedInt(c.out_channels()) * (in[0] / groups);
  for (int d = 0; d < dims; ++d) weight *= c.kernel();
  r.params.push_back(weight);
  if (!c.no_bias()) r.params.push_back(c.out_channels());
  return r;
}

absl::StatusOr<Inferred> InferBatchNorm(bool two_d, const Shape& in) {
  if (two_d ? in.size() != 3 : in.size() != 1 && in.size() != 2) {
    return Unfit(two_d ? "it expects a per-sample input [C, H, W]"
                       : "it expects a per-sample input [F] or [C, L]");
  }
  Inferred r;
  r.output = Checked(in);
  r.params = {in[0], in[0]};  // scale and shift
  return r;
}

absl::StatusOr<Inferred> InferPool(const PoolSpec& p, const Shape& in) {
  const int64_t stride = p.stride() > 0 ? p.stride() : p.kernel();
  if (p.kernel() < 1 || p.stride() < 0 || p.padding() < 0 ||
      2 * int64_t{p.padding()} > p.kernel()) {
    return Unfit(absl::StrCat(
        "kernel must be at least 1, stride not negative and padding in "
        "[0, kernel / 2], got ",
        p.kernel(), ", ", p.stride(), " and ", p.padding()));
  }
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  // The pooling kernels index a plane with int32.
  if (CheckedInt(in[1]) * in[2] >
      CheckedInt(std::numeric_limits<int32_t>::max())) {
    return Unfit("an input plane is too large for int32 indices");
  }
  Inferred r;
  r.output = {in[0]};
  for (int d = 1; d <= 2; ++d) {
    const CheckedInt padded = CheckedInt(in[d]) + CheckedInt(2) * p.padding();
    if (padded < CheckedInt(p.kernel())) {
      return Unfit(absl::StrCat("the kernel ", p.kernel(),
                                " does not fit the padded input"));
    }
    r.output.push_back(Positions(padded, p.kernel(), stride));
  }
  return r;
}

absl::StatusOr<Inferred> InferPool1d(const PoolSpec& p, const Shape& in) {
  const int64_t stride = p.stride() > 0 ? p.stride() : p.kernel();
  if (p.kernel() < 1 || p.stride() < 0 || p.padding() < 0 ||
      2 * int64_t{p.padding()} > p.kernel()) {
    return Unfit(absl::StrCat(
        "kernel must be at least 1, stride not negative and padding in "
        "[0, kernel / 2], got ",
        p.kernel(), ", ", p.stride(), " and ", p.padding()));
  }
  if (in.size() != 2) return Unfit("it expects a per-sample input [C, L]");
  if (in[1] > std::numeric_limits<int32_t>::max()) {
    return Unfit("an input row is too long for int32 indices");
  }
  const CheckedInt padded = CheckedInt(in[1]) + CheckedInt(2) * p.padding();
  if (padded < CheckedInt(p.kernel())) {
    return Unfit(absl::StrCat("the kernel ", p.kernel(),
                              " does not fit the padded input"));
  }
  Inferred r;
  r.output = {in[0], Positions(padded, p.kernel(), stride)};
  return r;
}

// LayerNorm: weight and bias of the per-sample shape; GroupNorm: per
// channel (a flat input's features), and the groups must divide them.
absl::StatusOr<Inferred> InferNorm(const Shape& in, bool affine, int64_t groups,
                                   const Shape& output = Shape()) {
  if (in.empty() || in.size() > 3) {
    return Unfit("it expects a per-sample input [F], [C, L] or [C, H, W]");
  }
  Inferred r;
  r.output = Checked(output.empty() ? in : output);
  if (groups > 0) {
    if (in[0] % groups != 0) {
      return Unfit(absl::StrCat("groups (", groups,
                                ") must divide the channels (", in[0], ")"));
    }
    if (affine) r.params = {in[0], in[0]};
  } else if (affine) {
    const CheckedInt n = Elements(Checked(in));
    r.params = {n, n};
  }
  return r;
}

absl::StatusOr<Inferred> InferGlobalPool(const Shape& in) {
  if (in.size() != 2 && in.size() != 3) {
    return Unfit("it expects a per-sample input [C, H, W] or [C, L]");
  }
  Inferred r;
  r.output = {in[0]};
  return r;
}

absl::StatusOr<Inferred> InferFlatten(const Shape& in) {
  if (in.empty() || in.size() > 3) {
    return Unfit("it expects a per-sample input [F], [C, L] or [C, H, W]");
  }
  Inferred r;
  r.output = {Elements(Checked(in))};
  return r;
}

absl::StatusOr<LayerSizes> InferLayer(const LayerSpec& l, const Shape& in);
std::string Kind(const LayerSpec& l);

// Sequences are {D, L} (worker/layers/layer.h).
absl::Status CheckSequence(const Shape& in) {
  if (in.size() == 2) return absl::OkStatus();
  return Unfit(
      "it expects a sequence {D, L} (features at each position), as an "
      "embedding gives");
}

absl::StatusOr<Inferred> InferEmbedding(const EmbeddingSpec& e,
                                        const Shape& in) {
  if (e.vocab_size() <= 0 || e.dim() <= 0) {
    return Unfit(absl::StrCat("vocab_size and dim must be positive, got ",
                              e.vocab_size(), " and ", e.dim()));
  }
  if (in.size() != 2 || in[0] != 1) {
    return Unfit(
        "it expects token ids {1, L}, as the TOKENS data set gives; an "
        "embedding is the model's first layer");
  }
  Inferred r;
  r.output = {e.dim(), in[1]};
  r.params = {CheckedInt(e.vocab_size()) * e.dim()};
  r.no_decay = {true};
  return r;
}

absl::StatusOr<Inferred> InferPositional(const Shape& in) {
  RETURN_IF_ERROR(CheckSequence(in));
  Inferred r;
  r.output = Checked(in);
  r.params = {CheckedInt(in[0]) * in[1]};
  r.no_decay = {true};
  return r;
}

absl::Status CheckHeads(int64_t heads, const Shape& in) {
  RETURN_IF_ERROR(CheckSequence(in));
  if (heads >= 1 && in[0] % heads == 0) return absl::OkStatus();
  return Unfit(absl::StrCat("heads (", heads, ") must divide the features (",
                            in[0], ")"));
}

// Attention's tensors (in_proj weight and bias, out_proj weight and bias)
// and what its forward keeps per sample: Q, K and V, the probabilities of
// every head, the heads' outputs and its output.
void AddAttention(int64_t heads, const Shape& in, Inferred* r) {
  const CheckedInt d = in[0], len = in[1];
  r->params.insert(r->params.end(), {d * d * 3, d * 3, d * d, d});
  r->no_decay.insert(r->no_decay.end(), {false, true, false, true});
  *r->activations += d * len * 5 + CheckedInt(heads) * len * len;
}

absl::StatusOr<Inferred> InferAttention(const AttentionSpec& a,
                                        const Shape& in) {
  RETURN_IF_ERROR(CheckHeads(a.heads(), in));
  Inferred r;
  r.output = Checked(in);
  r.activations = 0;
  AddAttention(a.heads(), in, &r);
  return r;
}

// ln1, attention, ln2, mlp.0 and mlp.2, in that order
// (worker/layers/transformer_block.h).
absl::StatusOr<Inferred> InferTransformerBlock(const TransformerBlockSpec& b,
                                               const Shape& in) {
  RETURN_IF_ERROR(CheckHeads(b.heads(), in));
  const CheckedInt d = in[0], len = in[1];
  const CheckedInt hidden = d * (b.mlp_ratio() > 0 ? b.mlp_ratio() : 4);
  Inferred r;
  r.output = Checked(in);
  r.activations = 0;
  r.params = {d, d};
  r.no_decay = {true, true};
  AddAttention(b.heads(), in, &r);
  r.params.insert(r.params.end(), {d, d, hidden * d, hidden, d * hidden, d});
  r.no_decay.insert(r.no_decay.end(), {true, true, false, true, false, true});
  // ln1, the first residual sum, ln2, the hidden layer before and after
  // GELU, and the output.
  *r.activations += d * len * 4 + hidden * len * 2;
  return r;
}

// The tied head borrows the first embedding's weight: no tensors of its
// own. `vocab` and `dim` are that embedding's.
absl::StatusOr<Inferred> InferTiedHead(int64_t vocab, int64_t dim,
                                       const Shape& in) {
  RETURN_IF_ERROR(CheckSequence(in));
  if (in[0] != dim) {
    return Unfit(absl::StrCat("its input has ", in[0],
                              " features but the embedding it shares its "
                              "weight with has dim ",
                              dim));
  }
  Inferred r;
  r.output = {vocab, in[1]};
  return r;
}

// A residual block is a chain of convolutions, batch norms and ReLUs
// (worker/layers/residual.h), and a shortcut convolution and batch norm
// when the shape changes: inferred as those layers.
std::vector<LayerSpec> ResidualMain(const ResidualSpec& r) {
  const int64_t stride = r.stride() > 0 ? r.stride() : 1;
  std::vector<LayerSpec> main;
  auto conv = [&](int64_t out, int64_t k, int64_t s, int64_t pad) {
    ConvSpec* c = main.emplace_back().mutable_conv2d();
    c->set_out_channels(out);
    c->set_kernel(k);
    c->set_stride(s);
    c->set_padding(pad);
    c->set_no_bias(true);
    main.emplace_back().mutable_batchnorm2d();
  };
  auto relu = [&] { main.emplace_back().mutable_relu(); };
  if (!r.bottleneck()) {
    conv(r.out_channels(), 3, stride, 1);
    relu();
    conv(r.out_channels(), 3, 1, 1);
    return main;
  }
  const int64_t width = r.out_channels() / 4;
  conv(width, 1, 1, 0);
  relu();
  conv(width, 3, stride, 1);
  relu();
  conv(r.out_channels(), 1, 1, 0);
  return main;
}

// The shortcut when the block changes the shape: a strided 1x1
// convolution without bias and a batch norm.
std::vector<LayerSpec> ResidualShortcut(const ResidualSpec& r) {
  std::vector<LayerSpec> shortcut(2);
  ConvSpec* c = shortcut[0].mutable_conv2d();
  c->set_out_channels(r.out_channels());
  c->set_kernel(1);
  c->set_stride(r.stride() > 0 ? r.stride() : 1);
  c->set_no_bias(true);
  shortcut[1].mutable_batchnorm2d();
  return shortcut;
}

// Runs `chain` from *shape, appending its parameters and activations.
absl::Status AddChain(const std::vector<LayerSpec>& chain, Shape* shape,
                      Inferred* out) {
  for (const LayerSpec& l : chain) {
    ASSIGN_OR_RETURN(const LayerSizes s, InferLayer(l, *shape));
    out->params.insert(out->params.end(), s.param_tensors.begin(),
                       s.param_tensors.end());
    out->no_decay.insert(out->no_decay.end(), s.param_no_decay.begin(),
                         s.param_no_decay.end());
    *out->activations += s.activations;
    *shape = s.output;
  }
  return absl::OkStatus();
}

absl::StatusOr<Inferred> InferResidual(const ResidualSpec& r, const Shape& in) {
  const int64_t multiple = r.bottleneck() ? 4 : 1;
  if (r.out_channels() < multiple || r.out_channels() % multiple != 0 ||
      r.stride() < 0) {
    return Unfit(absl::StrCat("out_channels must be a positive multiple of ",
                              multiple, " and stride not negative, got ",
                              r.out_channels(), " and ", r.stride()));
  }
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  Inferred out;
  out.activations = 0;
  Shape main = in;
  RETURN_IF_ERROR(AddChain(ResidualMain(r), &main, &out));
  if (main != in) {
    Shape shortcut = in;
    RETURN_IF_ERROR(AddChain(ResidualShortcut(r), &shortcut, &out));
  }
  out.output = Checked(main);
  return out;
}

// Each path is a chain from the block's input; the outputs are summed
// (equal shapes) or concatenated along the first dimension (the rest
// equal), as worker/layers/branch.h.
absl::StatusOr<Inferred> InferBranch(const BranchSpec& b, const Shape& in) {
  if (b.paths_size() == 0) return Unfit("it needs at least one path");
  const bool sum = b.combine() == BranchSpec::SUM;
  Inferred out;
  out.activations = 0;
  Shape first;
  for (int p = 0; p < b.paths_size(); ++p) {
    Shape shape = in;
    const auto& layers = b.paths(p).layers();
    for (int i = 0; i < layers.size(); ++i) {
      absl::StatusOr<LayerSizes> s = InferLayer(layers[i], shape);
      if (!s.ok()) {
        return Unfit(
            absl::StrCat("path ", p, " layer ", i, " (", Kind(layers[i]),
                         ") cannot take input of shape ", ShapeString(shape),
                         ": ", s.status().message()));
      }
      out.params.insert(out.params.end(), s->param_tensors.begin(),
                        s->param_tensors.end());
      out.no_decay.insert(out.no_decay.end(), s->param_no_decay.begin(),
                          s->param_no_decay.end());
      *out.activations += s->activations;
      shape = s->output;
    }
    if (p == 0) {
      first = shape;
      out.output = Checked(shape);
      continue;
    }
    const bool fits =
        sum ? shape == first
            : shape.size() == first.size() &&
                  std::equal(shape.begin() + 1, shape.end(), first.begin() + 1);
    if (!fits) {
      return Unfit(absl::StrCat(
          "path ", p, " gives ", ShapeString(shape), " but path 0 gives ",
          ShapeString(first),
          sum ? "; summed paths must give the same shape"
              : "; concatenated paths must agree in all but the channels"));
    }
    if (!sum) out.output[0] += shape[0];
  }
  *out.activations += Elements(out.output);
  return out;
}

absl::StatusOr<Inferred> InferKind(const LayerSpec& l, const Shape& in) {
  switch (l.kind_case()) {
    case LayerSpec::kLinear:
      return InferLinear(l.linear(), in);
    case LayerSpec::kConv1D:
      return InferConv(l.conv1d(), 1, in);
    case LayerSpec::kConv2D:
      return InferConv(l.conv2d(), 2, in);
    case LayerSpec::kBatchnorm1D:
      return InferBatchNorm(false, in);
    case LayerSpec::kBatchnorm2D:
      return InferBatchNorm(true, in);
    case LayerSpec::kMaxpool2D:
      return InferPool(l.maxpool2d(), in);
    case LayerSpec::kAvgpool2D:
      return InferPool(l.avgpool2d(), in);
    case LayerSpec::kGlobalAvgpool:
      return InferGlobalPool(in);
    case LayerSpec::kFlatten:
      return InferFlatten(in);
    case LayerSpec::kResidual:
      return InferResidual(l.residual(), in);
    case LayerSpec::kBranch:
      return InferBranch(l.branch(), in);
    case LayerSpec::kMaxpool1D:
      return InferPool1d(l.maxpool1d(), in);
    case LayerSpec::kAvgpool1D:
      return InferPool1d(l.avgpool1d(), in);
    case LayerSpec::kLayernorm:
      if (l.layernorm().per_position()) {
        RETURN_IF_ERROR(CheckSequence(in));
        return InferNorm({in[0]}, !l.layernorm().no_affine(), 0, in);
      }
      return InferNorm(in, !l.layernorm().no_affine(), 0);
    case LayerSpec::kEmbedding:
      return InferEmbedding(l.embedding(), in);
    case LayerSpec::kPositionalEmbedding:
      return InferPositional(in);
    case LayerSpec::kAttention:
      return InferAttention(l.attention(), in);
    case LayerSpec::kTransformerBlock:
      return InferTransformerBlock(l.transformer_block(), in);
    case LayerSpec::kTiedLmHead:
      // InferModelSizes handles the model's own layers.
      return Unfit(
          "a tied_lm_head must be one of the model's layers (not inside a "
          "branch), after an embedding");
    case LayerSpec::kGroupnorm:
      if (l.groupnorm().groups() < 1) {
        return Unfit(absl::StrCat("groups must be positive, got ",
                                  l.groupnorm().groups()));
      }
      return InferNorm(in, !l.groupnorm().no_affine(), l.groupnorm().groups());
    case LayerSpec::kGelu:
    case LayerSpec::kSilu:
    case LayerSpec::kTanh:
    case LayerSpec::kSigmoid:
    case LayerSpec::kLeakyRelu:
    case LayerSpec::kRelu:
    case LayerSpec::kDropout: {
      Inferred r;
      r.output = Checked(in);
      return r;
    }
    case LayerSpec::KIND_NOT_SET:
      break;
  }
  return Unfit("it names no layer kind");
}

std::string Kind(const LayerSpec& l) {
  const google::protobuf::OneofDescriptor* kind =
      l.GetDescriptor()->oneof_decl(0);
  const google::protobuf::FieldDescriptor* fd =
      l.GetReflection()->GetOneofFieldDescriptor(l, kind);
  return fd != nullptr ? fd->name() : "none";
}

// Converts a checked result to plain sizes; an overflow anywhere in it is
// an error.
absl::StatusOr<LayerSizes> Settle(const Inferred& r, const Shape& in) {
  LayerSizes s;
  s.input = in;
  CheckedInt params = 0;
  for (CheckedInt p : r.params) {
    if (p.overflow()) return Unfit("its parameter count passes 2^63");
    s.param_tensors.push_back(p.value());
    params += p;
  }
  for (CheckedInt d : r.output) {
    if (d.overflow()) return Unfit("its output size passes 2^63");
    s.output.push_back(d.value());
  }
  const CheckedInt out = Elements(r.output);
  const CheckedInt acts = r.activations.value_or(out);
  if (params.overflow() || out.overflow() || acts.overflow()) {
    return Unfit(params.overflow() ? "its parameters pass 2^63 elements"
                                   : "its output passes 2^63 elements");
  }
  s.parameters = params.value();
  s.activations = acts.value();
  return s;
}

absl::StatusOr<LayerSizes> InferLayer(const LayerSpec& l, const Shape& in) {
  ASSIGN_OR_RETURN(const Inferred r, InferKind(l, in));
  ASSIGN_OR_RETURN(LayerSizes s, Settle(r, in));
  s.kind = Kind(l);
  s.param_no_decay = r.no_decay;
  if (s.param_no_decay.empty()) {
    // Layers declare (weight, bias), in that order.
    for (size_t i = 0; i < s.param_tensors.size(); ++i) {
      s.param_no_decay.push_back(
          IsBiasOrNormParam(s.kind, i == 1 ? "bias" : "weight"));
    }
  }
  return s;
}

// InferLayer, and a tied head after `embedding` (null: none yet).
absl::StatusOr<LayerSizes> InferTopLayer(const LayerSpec& l,
                                         const LayerSpec* embedding,
                                         const Shape& in) {
  if (!l.has_tied_lm_head()) return InferLayer(l, in);
  if (embedding == nullptr) {
    return Unfit("tied_lm_head needs an embedding layer before it");
  }
  ASSIGN_OR_RETURN(const Inferred r,
                   InferTiedHead(embedding->embedding().vocab_size(),
                                 embedding->embedding().dim(), in));
  ASSIGN_OR_RETURN(LayerSizes s, Settle(r, in));
  s.kind = Kind(l);
  return s;
}

absl::Status CheckInput(const Shape& input) {
  for (int64_t d : input) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the per-sample input ", ShapeString(input),
                       " has an empty dimension"));
    }
  }
  if (input.empty() || Elements(Checked(input)).overflow()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the per-sample input ", ShapeString(input),
        input.empty() ? " has no dimensions" : " has more than 2^63 elements"));
  }
  return absl::OkStatus();
}

// Adds `s` to the totals; false when one passes int64_t.
bool Accumulate(const LayerSizes& s, CheckedInt* params, CheckedInt* padded,
                CheckedInt* acts) {
  for (int64_t p : s.param_tensors) *padded += RoundUpTo(p, kParamAlignment);
  *params += s.parameters;
  *acts += s.activations;
  return !params->overflow() && !padded->overflow() && !acts->overflow();
}

// Layer i > 0 writes the gradient of its input, layer i-1's output, into
// the buffer of parity (n - 1 - i) % 2.
std::vector<ModelSizes::GradientBuffer> GradientBuffers(
    const std::vector<LayerSizes>& layers) {
  const int n = static_cast<int>(layers.size());
  std::vector<ModelSizes::GradientBuffer> buffers(2);
  for (int i = 1; i < n; ++i) {
    ModelSizes::GradientBuffer& b = buffers[(n - 1 - i) % 2];
    const int64_t elements = NumElements(layers[i].input);
    if (elements > b.elements) b = {i - 1, elements};
  }
  std::vector<ModelSizes::GradientBuffer> used;
  for (const ModelSizes::GradientBuffer& b : buffers) {
    if (b.layer >= 0) used.push_back(b);
  }
  return used;
}

}  // namespace

std::vector<int64_t> ModelSizes::PaddedParamSizes() const {
  std::vector<int64_t> sizes;
  for (const LayerSizes& l : layers) {
    for (int64_t p : l.param_tensors) {
      sizes.push_back(RoundUpTo(p, kParamAlignment).value());
    }
  }
  return sizes;
}

std::vector<bool> ModelSizes::ParamNoDecay() const {
  std::vector<bool> flags;
  for (const LayerSizes& l : layers) {
    flags.insert(flags.end(), l.param_no_decay.begin(), l.param_no_decay.end());
  }
  return flags;
}

bool IsBiasOrNormParam(const std::string& kind, const std::string& name) {
  return name == "bias" || absl::StrContains(kind, "norm");
}

std::string LayerName(int index, const std::string& kind) {
  return absl::StrCat("layer ", index, " (", kind, ")");
}

absl::StatusOr<ModelSizes> InferModelSizes(const std::vector<LayerSpec>& layers,
                                           const Shape& input,
                                           int* failed_layer) {
  if (failed_layer != nullptr) *failed_layer = -1;
  RETURN_IF_ERROR(CheckInput(input));
  ModelSizes m;
  m.input = input;
  CheckedInt params = 0, padded = 0, acts = 0;
  Shape shape = input;
  const LayerSpec* embedding = nullptr;  // the first, which a tied head uses
  for (size_t i = 0; i < layers.size(); ++i) {
    absl::StatusOr<LayerSizes> s = InferTopLayer(layers[i], embedding, shape);
    if (embedding == nullptr && layers[i].has_embedding()) {
      embedding = &layers[i];
    }
    if (s.ok() && !Accumulate(*s, &params, &padded, &acts)) {
      s = Unfit("the model's sizes pass 2^63 elements");
    }
    if (!s.ok()) {
      if (failed_layer != nullptr) *failed_layer = static_cast<int>(i);
      return absl::InvalidArgumentError(absl::StrCat(
          LayerName(i, Kind(layers[i])), " cannot take input of shape ",
          ShapeString(shape), ": ", s.status().message()));
    }
    shape = s->output;
    m.layers.push_back(*std::move(s));
  }
  m.parameters = params.value();
  m.padded_parameters = padded.value();
  m.activations = acts.value();
  m.gradient_buffers = GradientBuffers(m.layers);
  return m;
}

}  // namespace cohort
