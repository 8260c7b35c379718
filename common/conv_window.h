// A convolution's window per spatial dim, resolved from its ConvSpec: the
// square fields (kernel, stride, padding), conv2d's [height, width] forms
// (kernel_hw, stride_hw, padding_hw) and padding SAME, so that the shape
// inference, both engines and the ONNX export read one answer.
//
// Plain values and a pure function; thread-safe.
#ifndef COHORT_COMMON_CONV_WINDOW_H_
#define COHORT_COMMON_CONV_WINDOW_H_

#include <cstdint>

#include "proto/job.pb.h"

namespace cohort {

struct ConvWindow {
  // A 1-D convolution has kernel_h = stride_h = 1 and no rows of padding.
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  // Zero rows above and below, columns left and right. They differ only
  // for SAME with an odd total, whose extra zero goes after (PyTorch's
  // padding="same").
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t dilation = 1;

  // One kernel size, stride and padding for every dim and side: the form
  // the square fields alone can say.
  bool Square() const {
    return kernel_h == kernel_w && stride_h == stride_w &&
           pad_top == pad_bottom && pad_left == pad_right &&
           pad_top == pad_left;
  }
  // Each dim's padding the same before and after.
  bool Symmetric() const {
    return pad_top == pad_bottom && pad_left == pad_right;
  }
};

// The window of `c` over `dims` (1 or 2) spatial dims. Unset fields take
// their defaults (stride 1, dilation 1); a [height, width] field of the
// wrong length is ignored (the spec check refuses it).
ConvWindow ResolveConvWindow(const ConvSpec& c, int dims);

// Whether `c` uses conv2d's rectangular or SAME fields at all.
bool UsesConv2dFields(const ConvSpec& c);

}  // namespace cohort

#endif  // COHORT_COMMON_CONV_WINDOW_H_
