// The GPU engine's convolutions (LayerSpec.conv1d and conv2d).
#include "common/conv_window.h"
#include "worker/gpu/layers/gpu_conv.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeConv(const LayerSpec& l,
                                                   Precision precision) {
  const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
  const int64_t groups = c.groups() > 0 ? c.groups() : 1;
  if (l.has_conv2d() && UsesConv2dFields(c)) {
    return std::make_unique<GpuConv>(c.out_channels(), ResolveConvWindow(c, 2),
                                     !c.no_bias(), precision == BF16, groups);
  }
  return std::make_unique<GpuConv>(
      c.out_channels(), c.kernel(), c.stride() > 0 ? c.stride() : 1,
      c.padding(), !c.no_bias(), l.has_conv1d(), precision == BF16, groups,
      c.dilation() > 0 ? c.dilation() : 1);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kConv1D, &MakeConv);
COHORT_REGISTER_GPU_LAYER(LayerSpec::kConv2D, &MakeConv);

}  // namespace cohort
