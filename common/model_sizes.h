// Shape inference over a job's layer specs, in checked arithmetic.
//
// Every size a model will have -- each layer's per-sample output shape, its
// parameter tensors, the activations it keeps -- follows from the layer
// specs and the data set's sample shape alone, so it can be computed before
// anything is allocated, and by processes that never build the model: the
// spec validator (common/spec.h, for every entry point that reads a spec),
// the coordinator and the parameter-server shards. The model builder
// (worker/zoo.h) runs the same inference first and checks that the layers
// it configures agree with it, so the two cannot drift apart.
//
// The rules are those of the layers' Configure (worker/layers/): the same
// input ranks, the same "does the kernel fit" checks, the same output
// arithmetic and the same parameter tensors in the same order. Arithmetic
// that would pass int64_t is an error naming the layer, never a wrap. Each
// kind's rules sit with the kind, in common/layer_kinds/.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef COHORT_COMMON_MODEL_SIZES_H_
#define COHORT_COMMON_MODEL_SIZES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/layer_sizes.h"
#include "common/tensor.h"
#include "proto/job.pb.h"

namespace cohort {

// Parameter tensors start at multiples of this many elements in the flat
// parameter buffer (worker/layers/param_store.h): 64 bytes of float.
inline constexpr int64_t kParamAlignment = 16;

struct ModelSizes {
  Shape input;  // per sample
  std::vector<LayerSizes> layers;
  int64_t parameters = 0;
  // The flat buffer's length: each tensor rounded up to kParamAlignment.
  int64_t padded_parameters = 0;
  int64_t activations = 0;  // per sample, over every layer
  // Backward's two ping-pong buffers for the gradients of the layers'
  // inputs (worker/model.h): layers n-1, n-3, ... use one, n-2, n-4, ...
  // the other (layer 0 needs none), and each grows to the largest it
  // carries. Per buffer: that size per sample, and the layer whose output
  // it is the gradient of.
  struct GradientBuffer {
    int layer = -1;
    int64_t elements = 0;
  };
  std::vector<GradientBuffer> gradient_buffers;

  // Each parameter tensor's length in the flat buffer (padding included),
  // in order: what the parameter-server partition plan splits.
  std::vector<int64_t> PaddedParamSizes() const;
  // Each parameter tensor's LayerSizes::param_no_decay, in the same order.
  std::vector<bool> ParamNoDecay() const;
};

// LeakyReLU's negative slope: as written, else PyTorch's 0.01. One
// definition for the CPU and GPU layers and the exports.
inline double LeakyReluSlope(const LeakyReluSpec& s) {
  return s.has_negative_slope() ? s.negative_slope() : 0.01;
}

// "layer 3 (linear)": how messages name layer `index` of kind `kind`.
std::string LayerName(int index, const std::string& kind);

// Sizes of `layers` over per-sample inputs of shape `input`.
// InvalidArgument naming the layer ("layer 1 (linear) cannot take input of
// shape [4, 28, 28]: ...") when an input does not fit a layer or a size
// passes int64_t; *failed_layer (if given) is then the layer's index, or -1
// when `input` itself is at fault.
absl::StatusOr<ModelSizes> InferModelSizes(const std::vector<LayerSpec>& layers,
                                           const Shape& input,
                                           int* failed_layer = nullptr);

// The per-sample shape the data set of `data` gives: [1, 28, 28] for MNIST,
// [3, 32, 32] for CIFAR-10, the synthetic shape (default [1, 28, 28]).
Shape DataSampleShape(const DatasetSpec& data);

// The sizes of `spec`'s model over its data set's samples (LayerSpecs over
// DataSampleShape). A zoo model must be given the input it was designed
// for; InvalidArgument otherwise, NotFound for an unknown zoo name.
absl::StatusOr<ModelSizes> InferJobModelSizes(const JobSpec& spec,
                                              int* failed_layer = nullptr);

}  // namespace cohort

#endif  // COHORT_COMMON_MODEL_SIZES_H_
