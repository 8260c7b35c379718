// The GPU engine's branches (LayerSpec.branch): each path's layers are
// built through MakeGpuLayer, so a branch holds any registered kind.
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "worker/gpu/layers/gpu_branch.h"
#include "worker/gpu/layers/gpu_layer_factory.h"
#include "worker/gpu/layers/gpu_layer_registry.h"

namespace cohort {
namespace {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeBranch(const LayerSpec& l,
                                                     Precision precision) {
  std::vector<GpuBranch::Path> paths;
  for (const BranchSpec::Path& p : l.branch().paths()) {
    GpuBranch::Path& path = paths.emplace_back();
    for (const LayerSpec& sub : p.layers()) {
      ASSIGN_OR_RETURN(std::unique_ptr<GpuLayer> layer,
                       MakeGpuLayer(sub, precision));
      path.push_back(std::move(layer));
    }
  }
  return std::make_unique<GpuBranch>(std::move(paths), l.branch().combine());
}

}  // namespace

COHORT_REGISTER_GPU_LAYER(LayerSpec::kBranch, &MakeBranch);

}  // namespace cohort
