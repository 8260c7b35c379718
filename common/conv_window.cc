#include "common/conv_window.h"

#include "google/protobuf/repeated_field.h"

namespace cohort {
namespace {

// Field `hw`'s value for dim `d` (0 height, 1 width) when it lists two,
// else `square`.
int64_t PerDim(const google::protobuf::RepeatedField<int32_t>& hw, int d,
               int64_t square) {
  return hw.size() == 2 ? hw[d] : square;
}

// PyTorch's padding="same" for one dim (stride 1): the total d * (k - 1)
// split in half, the odd zero after.
void SamePadding(int64_t kernel, int64_t dilation, int64_t* before,
                 int64_t* after) {
  const int64_t total = dilation * (kernel - 1);
  *before = total / 2;
  *after = total - *before;
}

}  // namespace

ConvWindow ResolveConvWindow(const ConvSpec& c, int dims) {
  ConvWindow w;
  const int64_t stride = c.stride() > 0 ? c.stride() : 1;
  w.dilation = c.dilation() > 0 ? c.dilation() : 1;
  w.kernel_w = PerDim(c.kernel_hw(), 1, c.kernel());
  w.stride_w = PerDim(c.stride_hw(), 1, stride);
  w.pad_left = w.pad_right = PerDim(c.padding_hw(), 1, c.padding());
  if (dims == 2) {
    w.kernel_h = PerDim(c.kernel_hw(), 0, c.kernel());
    w.stride_h = PerDim(c.stride_hw(), 0, stride);
    w.pad_top = w.pad_bottom = PerDim(c.padding_hw(), 0, c.padding());
  }
  if (c.padding_mode() == ConvSpec::SAME) {
    SamePadding(w.kernel_w, w.dilation, &w.pad_left, &w.pad_right);
    if (dims == 2) {
      SamePadding(w.kernel_h, w.dilation, &w.pad_top, &w.pad_bottom);
    }
  }
  return w;
}

bool UsesConv2dFields(const ConvSpec& c) {
  return !c.kernel_hw().empty() || !c.stride_hw().empty() ||
         !c.padding_hw().empty() || c.padding_mode() != ConvSpec::EXPLICIT;
}

}  // namespace cohort
