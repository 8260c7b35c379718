#include "worker/zoo.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "worker/layers/activation.h"
#include "worker/layers/attention.h"
#include "worker/layers/batchnorm.h"
#include "worker/layers/branch.h"
#include "worker/layers/conv.h"
#include "worker/layers/dropout.h"
#include "worker/layers/elementwise_activation.h"
#include "worker/layers/embedding.h"
#include "worker/layers/flatten.h"
#include "worker/layers/linear.h"
#include "worker/layers/norm.h"
#include "worker/layers/pool.h"
#include "worker/layers/pool1d.h"
#include "worker/layers/residual.h"
#include "worker/layers/tied_lm_head.h"
#include "worker/layers/transformer_block.h"

namespace cohort {
namespace {

template <typename T>
std::unique_ptr<Layer<T>> MakeLayer(const LayerSpec& l) {
  switch (l.kind_case()) {
    case LayerSpec::kLinear:
      return std::make_unique<Linear<T>>(l.linear().out_features(),
                                         !l.linear().no_bias());
    case LayerSpec::kConv1D:
    case LayerSpec::kConv2D: {
      const ConvSpec& c = l.has_conv1d() ? l.conv1d() : l.conv2d();
      ConvOptions o{c.out_channels(),
                    c.kernel(),
                    c.stride() > 0 ? c.stride() : 1,
                    c.padding(),
                    !c.no_bias(),
                    c.groups() > 0 ? c.groups() : 1,
                    c.dilation() > 0 ? c.dilation() : 1};
      if (l.has_conv1d()) return std::make_unique<Conv1d<T>>(o);
      return std::make_unique<Conv2d<T>>(o);
    }
    case LayerSpec::kBatchnorm1D:
    case LayerSpec::kBatchnorm2D: {
      const BatchNormSpec& s =
          l.has_batchnorm1d() ? l.batchnorm1d() : l.batchnorm2d();
      BatchNormOptions o;
      if (s.eps() > 0) o.eps = s.eps();
      if (s.momentum() > 0) o.momentum = s.momentum();
      if (l.has_batchnorm1d()) return std::make_unique<BatchNorm1d<T>>(o);
      return std::make_unique<BatchNorm2d<T>>(o);
    }
    case LayerSpec::kRelu:
      return std::make_unique<ReLU<T>>();
    case LayerSpec::kMaxpool2D:
    case LayerSpec::kAvgpool2D: {
      const PoolSpec& p = l.has_maxpool2d() ? l.maxpool2d() : l.avgpool2d();
      PoolOptions o{p.kernel(), p.stride() > 0 ? p.stride() : p.kernel(),
                    p.padding()};
      if (l.has_maxpool2d()) return std::make_unique<MaxPool2d<T>>(o);
      return std::make_unique<AvgPool2d<T>>(o);
    }
    case LayerSpec::kGlobalAvgpool:
      return std::make_unique<GlobalAvgPool<T>>();
    case LayerSpec::kFlatten:
      return std::make_unique<Flatten<T>>();
    case LayerSpec::kDropout:
      return std::make_unique<Dropout<T>>(l.dropout().p());
    case LayerSpec::kResidual: {
      const ResidualSpec& r = l.residual();
      const int64_t stride = r.stride() > 0 ? r.stride() : 1;
      if (r.bottleneck()) {
        return std::make_unique<Bottleneck<T>>(r.out_channels(), stride);
      }
      return std::make_unique<BasicBlock<T>>(r.out_channels(), stride);
    }
    case LayerSpec::kBranch: {
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
                                         l.branch().combine() == BranchSpec::SUM
                                             ? BranchCombine::kSum
                                             : BranchCombine::kConcat);
    }
    case LayerSpec::kGelu:
      return std::make_unique<ElementwiseActivation<T>>(
          l.gelu().tanh_approximation() ? ActivationKind::kGeluTanh
                                        : ActivationKind::kGelu);
    case LayerSpec::kSilu:
      return std::make_unique<ElementwiseActivation<T>>(ActivationKind::kSilu);
    case LayerSpec::kTanh:
      return std::make_unique<ElementwiseActivation<T>>(ActivationKind::kTanh);
    case LayerSpec::kSigmoid:
      return std::make_unique<ElementwiseActivation<T>>(
          ActivationKind::kSigmoid);
    case LayerSpec::kLeakyRelu:
      return std::make_unique<ElementwiseActivation<T>>(
          ActivationKind::kLeakyRelu, LeakyReluSlope(l.leaky_relu()));
    case LayerSpec::kLayernorm: {
      const LayerNormSpec& s = l.layernorm();
      NormOptions o;
      if (s.eps() > 0) o.eps = s.eps();
      o.affine = !s.no_affine();
      o.per_position = s.per_position();
      return std::make_unique<LayerNorm<T>>(o);
    }
    case LayerSpec::kGroupnorm: {
      const GroupNormSpec& s = l.groupnorm();
      NormOptions o;
      if (s.eps() > 0) o.eps = s.eps();
      o.affine = !s.no_affine();
      o.groups = s.groups();
      return std::make_unique<GroupNorm<T>>(o);
    }
    case LayerSpec::kMaxpool1D:
    case LayerSpec::kAvgpool1D: {
      const PoolSpec& p = l.has_maxpool1d() ? l.maxpool1d() : l.avgpool1d();
      PoolOptions o{p.kernel(), p.stride() > 0 ? p.stride() : p.kernel(),
                    p.padding()};
      return std::make_unique<Pool1d<T>>(l.has_maxpool1d(), o);
    }
    // Embeddings and the tied head (worker/model.h
    // ties the head to the first embedding).
    case LayerSpec::kEmbedding:
      return std::make_unique<Embedding<T>>(l.embedding().vocab_size(),
                                            l.embedding().dim());
    case LayerSpec::kPositionalEmbedding:
      return std::make_unique<PositionalEmbedding<T>>();
    case LayerSpec::kTiedLmHead:
      return std::make_unique<TiedLmHead<T>>();
    // Attention and the transformer block.
    case LayerSpec::kAttention: {
      const AttentionSpec& s = l.attention();
      return std::make_unique<Attention<T>>(
          AttentionOptions{s.heads(), !s.bidirectional(), s.dropout()});
    }
    case LayerSpec::kTransformerBlock: {
      const TransformerBlockSpec& s = l.transformer_block();
      TransformerBlockOptions o;
      o.heads = s.heads();
      if (s.mlp_ratio() > 0) o.mlp_ratio = s.mlp_ratio();
      o.causal = !s.bidirectional();
      o.dropout = s.dropout();
      if (s.eps() > 0) o.eps = s.eps();
      return std::make_unique<TransformerBlock<T>>(o);
    }
    case LayerSpec::KIND_NOT_SET:
      break;
  }
  return nullptr;
}

// The model's layers, as configured, against the inference that sized it
// (common/model_sizes.h): the validator and the memory estimate trusted
// those sizes, so a difference is a bug in one of the two.
template <typename T>
absl::Status CheckAgreement(const Model<T>& model, const ModelSizes& sizes) {
  const std::vector<Shape>& outputs = model.layer_outputs();
  for (size_t i = 0; i < sizes.layers.size() && i < outputs.size(); ++i) {
    if (outputs[i] != sizes.layers[i].output) {
      return absl::InternalError(absl::StrCat(
          LayerName(i, sizes.layers[i].kind), " gives ",
          ShapeString(outputs[i]), " but the shape inference says ",
          ShapeString(sizes.layers[i].output)));
    }
  }
  if (outputs.size() != sizes.layers.size() ||
      model.num_parameters() != sizes.parameters ||
      model.param_store().values().size() != sizes.padded_parameters) {
    return absl::InternalError(
        absl::StrCat("the model has ", model.num_parameters(), " parameters (",
                     model.param_store().values().size(),
                     " padded) but the shape inference says ", sizes.parameters,
                     " (", sizes.padded_parameters, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::StatusOr<typename Model<T>::LayerList> BuildLayers(
    const ModelSpec& spec) {
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> specs, LayerSpecs(spec));
  typename Model<T>::LayerList layers;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::unique_ptr<Layer<T>> l = MakeLayer<T>(specs[i]);
    if (l == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("model layer ", i, " names no layer kind"));
    }
    layers.push_back(std::move(l));
  }
  return layers;
}

template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildModel(const ModelSpec& spec,
                                                     const Shape& input_shape,
                                                     uint64_t seed) {
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> specs, LayerSpecs(spec));
  ASSIGN_OR_RETURN(const ModelSizes sizes, InferModelSizes(specs, input_shape));
  ASSIGN_OR_RETURN(auto layers, BuildLayers<T>(spec));
  ASSIGN_OR_RETURN(auto model,
                   Model<T>::Create(std::move(layers), input_shape));
  RETURN_IF_ERROR(CheckAgreement(*model, sizes));
  model->InitializeParameters(seed);
  return model;
}

template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildReplica(const ModelSpec& spec,
                                                       Model<T>& owner) {
  ASSIGN_OR_RETURN(auto layers, BuildLayers<T>(spec));
  return Model<T>::CreateReplica(std::move(layers), owner);
}

template absl::StatusOr<Model<float>::LayerList> BuildLayers<float>(
    const ModelSpec&);
template absl::StatusOr<Model<double>::LayerList> BuildLayers<double>(
    const ModelSpec&);
template absl::StatusOr<std::unique_ptr<Model<float>>> BuildModel<float>(
    const ModelSpec&, const Shape&, uint64_t);
template absl::StatusOr<std::unique_ptr<Model<double>>> BuildModel<double>(
    const ModelSpec&, const Shape&, uint64_t);
template absl::StatusOr<std::unique_ptr<Model<float>>> BuildReplica<float>(
    const ModelSpec&, Model<float>&);

}  // namespace cohort
