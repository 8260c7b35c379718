#include "worker/gpu/layers/gpu_layer_factory.h"

#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "worker/gpu/layers/gpu_activation.h"
#include "worker/gpu/layers/gpu_batchnorm.h"
#include "worker/gpu/layers/gpu_branch.h"
#include "worker/gpu/layers/gpu_conv.h"
#include "worker/gpu/layers/gpu_dropout.h"
#include "worker/gpu/layers/gpu_flatten.h"
#include "worker/gpu/layers/gpu_linear.h"
#include "worker/gpu/layers/gpu_pool.h"
#include "worker/gpu/layers/gpu_residual.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGpuLayer(const LayerSpec& l,
                                                       Precision precision) {
  const bool bf16 = precision == BF16;
  switch (l.kind_case()) {
    case LayerSpec::kLinear:
      return std::make_unique<GpuLinear>(l.linear().out_features(),
                                         !l.linear().no_bias(), bf16);
    case LayerSpec::kConv1D:
    case LayerSpec::kConv2D: {
      const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
      return std::make_unique<GpuConv>(
          c.out_channels(), c.kernel(), c.stride() > 0 ? c.stride() : 1,
          c.padding(), !c.no_bias(), l.has_conv1d(), bf16,
          c.groups() > 0 ? c.groups() : 1, c.dilation() > 0 ? c.dilation() : 1);
    }
    case LayerSpec::kBatchnorm1D:
      return std::make_unique<GpuBatchNorm>(l.batchnorm1d(), false);
    case LayerSpec::kBatchnorm2D:
      return std::make_unique<GpuBatchNorm>(l.batchnorm2d(), true);
    case LayerSpec::kRelu:
      return std::make_unique<GpuRelu>();
    case LayerSpec::kMaxpool2D:
    case LayerSpec::kAvgpool2D: {
      const PoolSpec& p = l.has_maxpool2d() ? l.maxpool2d() : l.avgpool2d();
      return std::make_unique<GpuPool>(
          l.has_maxpool2d() ? GpuPool::Kind::kMax : GpuPool::Kind::kAvg,
          p.kernel(), p.stride() > 0 ? p.stride() : p.kernel(), p.padding());
    }
    case LayerSpec::kGlobalAvgpool:
      return std::make_unique<GpuPool>(GpuPool::Kind::kGlobalAvg, 0, 0, 0);
    case LayerSpec::kFlatten:
      return std::make_unique<GpuFlatten>();
    case LayerSpec::kResidual:
      return std::make_unique<GpuResidual>(
          l.residual().out_channels(),
          l.residual().stride() > 0 ? l.residual().stride() : 1,
          l.residual().bottleneck(), bf16);
    case LayerSpec::kDropout:
      return std::make_unique<GpuDropout>(l.dropout().p());
    case LayerSpec::kBranch: {
      std::vector<GpuBranch::Path> paths;
      for (const BranchSpec::Path& p : l.branch().paths()) {
        GpuBranch::Path& path = paths.emplace_back();
        for (const LayerSpec& sub : p.layers()) {
          ASSIGN_OR_RETURN(std::unique_ptr<GpuLayer> layer,
                           MakeGpuLayer(sub, precision));
          path.push_back(std::move(layer));
        }
      }
      return std::make_unique<GpuBranch>(
          std::move(paths), l.branch().combine() == BranchSpec::SUM);
    }
    case LayerSpec::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("a model layer names no layer kind");
}

}  // namespace cohort
