// The CPU engine's convolutions (LayerSpec.conv1d and conv2d).
#include "worker/layers/conv.h"

#include "common/conv_window.h"
#include "worker/layer_registry.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeConv(const LayerSpec& l) {
  const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
  ConvOptions o{c.out_channels(),
                c.kernel(),
                c.stride() > 0 ? c.stride() : 1,
                c.padding(),
                !c.no_bias(),
                c.groups() > 0 ? c.groups() : 1,
                c.dilation() > 0 ? c.dilation() : 1};
  if (l.has_conv1d()) return std::make_unique<Conv1d<T>>(o);
  // A window the square fields can say (kernel_hw [3, 3]) keeps the square
  // options and their name.
  const ConvWindow w = ResolveConvWindow(c, 2);
  if (w.Square()) {
    o.kernel = w.kernel_w;
    o.stride = w.stride_w;
    o.padding = w.pad_left;
  } else {
    o.window = w;
  }
  return std::make_unique<Conv2d<T>>(o);
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kConv1D, MakeConv);
COHORT_REGISTER_CPU_LAYER(LayerSpec::kConv2D, MakeConv);

}  // namespace cohort
