// One layer's sizes as the shape inference reports them, and which of its
// parameters weight decay leaves out.
//
// A plain value type and a pure function: a LayerSizes belongs to whoever
// holds it, and every function here may be called concurrently.
#ifndef COHORT_COMMON_LAYER_SIZES_H_
#define COHORT_COMMON_LAYER_SIZES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/tensor.h"

namespace cohort {

struct LayerSizes {
  std::string kind;  // the LayerSpec field: "linear", "conv2d", "residual"...
  Shape input;       // per sample
  Shape output;      // per sample
  // Elements of each parameter tensor, in the order the layer declares
  // them (weight, bias; a residual block's in torchvision's order).
  std::vector<int64_t> param_tensors;
  // Per parameter tensor: a bias or a norm layer's parameter, which
  // optimizer.no_decay_bias_and_norm excludes from weight decay
  // (IsBiasOrNormParam; a residual block's from its inner layers).
  std::vector<bool> param_no_decay;
  int64_t parameters = 0;  // their sum
  // Per-sample elements the layer holds after a forward pass: its output,
  // and a residual block's inner activations too.
  int64_t activations = 0;
};

// Whether parameter `name` ("weight", "bias") of a layer of kind `kind`
// (the LayerSpec field name) is kept out of weight decay by
// optimizer.no_decay_bias_and_norm: every bias, and every parameter of a
// norm layer -- any kind whose name contains "norm" (batchnorm1d,
// batchnorm2d, layernorm, groupnorm ...), so a new norm kind needs nothing
// here.
inline bool IsBiasOrNormParam(const std::string& kind,
                              const std::string& name) {
  return name == "bias" || absl::StrContains(kind, "norm");
}

}  // namespace cohort

#endif  // COHORT_COMMON_LAYER_SIZES_H_
