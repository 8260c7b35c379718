// The CPU engine's branches (LayerSpec.branch): each path's layers are
// built through MakeLayer, so a branch holds any registered kind.
#include "worker/layers/branch.h"

#include <utility>
#include <vector>

#include "worker/layer_registry.h"

namespace cohort {
namespace {

BranchCombine Combine(BranchSpec::Combine c) {
  switch (c) {
    case BranchSpec::SUM:
      return BranchCombine::kSum;
    case BranchSpec::MUL:
      return BranchCombine::kMul;
    default:
      return BranchCombine::kConcat;
  }
}

template <typename T>
std::unique_ptr<Layer<T>> MakeBranch(const LayerSpec& l) {
  std::vector<typename Branch<T>::Path> paths;
  for (const BranchSpec::Path& p : l.branch().paths()) {
    typename Branch<T>::Path& path = paths.emplace_back();
    for (const LayerSpec& sub : p.layers()) {
      std::unique_ptr<Layer<T>> layer = MakeLayer<T>(sub);
      if (layer == nullptr) return nullptr;
      path.push_back(std::move(layer));
    }
  }
  return std::make_unique<Branch<T>>(std::move(paths),
                                     Combine(l.branch().combine()));
}

}  // namespace

COHORT_REGISTER_CPU_LAYER(LayerSpec::kBranch, MakeBranch);

}  // namespace cohort
