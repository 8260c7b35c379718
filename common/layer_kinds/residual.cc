// residual: torchvision's BasicBlock (or Bottleneck) with its shortcut, a
// 1x1 convolution and BatchNorm when the shape changes
// (worker/layers/residual.h).
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/layer_kind.h"
#include "common/shape_inference.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

using shape_inference::Checked;
using shape_inference::InferLayer;
using shape_inference::Unfit;
using spec_internal::NonNegative;
using spec_internal::Positive;
using spec_internal::Require;
using spec_internal::Scope;

absl::Status CheckResidual(const LayerSpec& l, const Scope& s) {
  const ResidualSpec& r = l.residual();
  RETURN_IF_ERROR(Positive(s, r, "out_channels", r.out_channels()));
  // The bottleneck's inner convolutions have out_channels / 4.
  RETURN_IF_ERROR(Require(
      !r.bottleneck() || r.out_channels() % 4 == 0, s, r, "out_channels",
      "a multiple of 4 with bottleneck: true", r.out_channels()));
  return NonNegative(s, r, "stride", r.stride());
}

void FillResidual(LayerSpec* l) {
  if (l->residual().stride() == 0) l->mutable_residual()->set_stride(1);
}

// A residual block is a chain of convolutions, batch norms and ReLUs, and
// a shortcut convolution and batch norm when the shape changes: inferred
// as those layers.
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
                      InferredLayer* out) {
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

absl::StatusOr<InferredLayer> InferResidual(const LayerSpec& l,
                                            const Shape& in) {
  const ResidualSpec& r = l.residual();
  const int64_t multiple = r.bottleneck() ? 4 : 1;
  if (r.out_channels() < multiple || r.out_channels() % multiple != 0 ||
      r.stride() < 0) {
    return Unfit(absl::StrCat("out_channels must be a positive multiple of ",
                              multiple, " and stride not negative, got ",
                              r.out_channels(), " and ", r.stride()));
  }
  if (in.size() != 3) return Unfit("it expects a per-sample input [C, H, W]");
  InferredLayer out;
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

const LayerKind kResidual = {"residual", CheckResidual, FillResidual,
                             InferResidual};
COHORT_REGISTER_LAYER_KIND(LayerSpec::kResidual, kResidual);

}  // namespace
}  // namespace cohort
