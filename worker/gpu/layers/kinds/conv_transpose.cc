// The GPU engine's transposed convolution (LayerSpec.conv_transpose2d).
#include "worker/gpu/layers/gpu_conv_transpose.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeConvTranspose2d(
    const LayerSpec& l, Precision precision) {
  const ConvTransposeSpec& c = l.conv_transpose2d();
  GpuConvTransposeOptions o;
  o.out_channels = c.out_channels();
  o.kernel = c.kernel();
  o.stride = c.stride() > 0 ? c.stride() : 1;
  o.padding = c.padding();
  o.output_padding = c.output_padding();
  o.groups = c.groups() > 0 ? c.groups() : 1;
  o.bias = !c.no_bias();
  return std::make_unique<GpuConvTranspose>(o, precision == BF16);
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kConvTranspose2D, &MakeConvTranspose2d);

}  // namespace cohort
