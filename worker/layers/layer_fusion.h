// Activation fusion over a chain of layers that run in turn (a model's
// layers, a branch's path): where a layer applies the activation after it
// to its own output (Layer::FuseActivation), the chain skips that
// activation layer in Forward and Backward. The layer before it then writes
// the activated output and takes dLoss/d(activated output) in Backward, so
// the activation costs no pass of its own over the tensor either way.
//
// A plain function; it owns nothing. Thread safety: none, like the layers.
#ifndef COHORT_WORKER_LAYERS_LAYER_FUSION_H_
#define COHORT_WORKER_LAYERS_LAYER_FUSION_H_

#include <memory>
#include <vector>

#include "worker/layers/layer.h"

namespace cohort {

// Offers each activation layer of `chain` (configured) to the layer before
// it, unless that one is skipped itself; returns, per layer, whether the
// chain skips it. The chain's input and its layers' Backward are unchanged;
// a skipped layer's output is its predecessor's.
template <typename T>
std::vector<bool> FuseActivations(
    const std::vector<std::unique_ptr<Layer<T>>>& chain);

extern template std::vector<bool> FuseActivations<float>(
    const std::vector<std::unique_ptr<Layer<float>>>&);
extern template std::vector<bool> FuseActivations<double>(
    const std::vector<std::unique_ptr<Layer<double>>>&);

}  // namespace cohort

#endif  // COHORT_WORKER_LAYERS_LAYER_FUSION_H_
