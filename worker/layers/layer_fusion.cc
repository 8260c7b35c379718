#include "worker/layers/layer_fusion.h"

namespace cohort {

template <typename T>
std::vector<bool> FuseActivations(
    const std::vector<std::unique_ptr<Layer<T>>>& chain) {
  std::vector<bool> skipped(chain.size(), false);
  for (size_t i = 1; i < chain.size(); ++i) {
    const FusedActivation act = chain[i]->fused_activation_kind();
    if (act == FusedActivation::kNone || skipped[i - 1]) continue;
    skipped[i] = chain[i - 1]->FuseActivation(act);
  }
  return skipped;
}

template std::vector<bool> FuseActivations<float>(
    const std::vector<std::unique_ptr<Layer<float>>>&);
template std::vector<bool> FuseActivations<double>(
    const std::vector<std::unique_ptr<Layer<double>>>&);

}  // namespace cohort
