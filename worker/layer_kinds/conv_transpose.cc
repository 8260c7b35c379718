// The CPU engine's transposed convolution (LayerSpec.conv_transpose2d).
#include "worker/layers/conv_transpose.h"

#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeConvTranspose2d(const LayerSpec& l) {
  const ConvTransposeSpec& c = l.conv_transpose2d();
  ConvTransposeOptions o;
  o.out_channels = c.out_channels();
  o.kernel = c.kernel();
  o.stride = c.stride() > 0 ? c.stride() : 1;
  o.padding = c.padding();
  o.output_padding = c.output_padding();
  o.bias = !c.no_bias();
  o.groups = c.groups() > 0 ? c.groups() : 1;
  return std::make_unique<ConvTranspose2d<T>>(o);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kConvTranspose2D, MakeConvTranspose2d);

}  // namespace cohort
