#include "worker/gpu/layers/gpu_layer_factory.h"

#include <utility>
#include <vector>

#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "worker/gpu/layers/gpu_activation.h"
#include "worker/gpu/layers/gpu_attention.h"
#include "worker/gpu/layers/gpu_batchnorm.h"
#include "worker/gpu/layers/gpu_branch.h"
#include "worker/gpu/layers/gpu_conv.h"
#include "worker/gpu/layers/gpu_dropout.h"
#include "worker/gpu/layers/gpu_elementwise_activation.h"
#include "worker/gpu/layers/gpu_embedding.h"
#include "worker/gpu/layers/gpu_flatten.h"
#include "worker/gpu/layers/gpu_linear.h"
#include "worker/gpu/layers/gpu_norm.h"
#include "worker/gpu/layers/gpu_pool.h"
#include "worker/gpu/layers/gpu_pool1d.h"
#include "worker/gpu/layers/gpu_residual.h"
#include "worker/gpu/layers/gpu_transformer_block.h"

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
    case LayerSpec::kGelu:
      return std::make_unique<GpuElementwiseActivation>(
          l.gelu().tanh_approximation() ? ActivationKind::kGeluTanh
                                        : ActivationKind::kGelu);
    case LayerSpec::kSilu:
      return std::make_unique<GpuElementwiseActivation>(ActivationKind::kSilu);
    case LayerSpec::kTanh:
      return std::make_unique<GpuElementwiseActivation>(ActivationKind::kTanh);
    case LayerSpec::kSigmoid:
      return std::make_unique<GpuElementwiseActivation>(
          ActivationKind::kSigmoid);
    case LayerSpec::kLeakyRelu:
      return std::make_unique<GpuElementwiseActivation>(
          ActivationKind::kLeakyRelu, LeakyReluSlope(l.leaky_relu()));
    case LayerSpec::kLayernorm: {
      const LayerNormSpec& s = l.layernorm();
      return std::make_unique<GpuNorm>(0, s.eps() > 0 ? s.eps() : 1e-5,
                                       !s.no_affine(), s.per_position());
    }
    case LayerSpec::kGroupnorm: {
      const GroupNormSpec& s = l.groupnorm();
      if (s.groups() < 1) {
        return absl::InvalidArgumentError("groupnorm: groups must be positive");
      }
      return std::make_unique<GpuNorm>(s.groups(), s.eps() > 0 ? s.eps() : 1e-5,
                                       !s.no_affine());
    }
    case LayerSpec::kMaxpool1D:
    case LayerSpec::kAvgpool1D: {
      const PoolSpec& p = l.has_maxpool1d() ? l.maxpool1d() : l.avgpool1d();
      return std::make_unique<GpuPool1d>(l.has_maxpool1d(), p.kernel(),
                                         p.stride(), p.padding());
    }
    // The transformer layers. GpuModel ties a tied_lm_head to the
    // model's first embedding.
    case LayerSpec::kEmbedding:
      return std::make_unique<GpuEmbedding>(l.embedding().vocab_size(),
                                            l.embedding().dim());
    case LayerSpec::kPositionalEmbedding:
      return std::make_unique<GpuPositionalEmbedding>();
    case LayerSpec::kAttention:
      return std::make_unique<GpuAttention>(l.attention().heads(),
                                            l.attention().bidirectional(),
                                            l.attention().dropout(), bf16);
    case LayerSpec::kTransformerBlock: {
      const TransformerBlockSpec& t = l.transformer_block();
      return std::make_unique<GpuTransformerBlock>(
          t.heads(), t.mlp_ratio() > 0 ? t.mlp_ratio() : 4, t.bidirectional(),
          t.dropout(), t.eps() > 0 ? t.eps() : 1e-5, bf16);
    }
    case LayerSpec::kTiedLmHead:
      return std::make_unique<GpuTiedHead>();
    case LayerSpec::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("a model layer names no layer kind");
}

}  // namespace cohort
