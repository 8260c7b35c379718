#include "worker/zoo.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "worker/layer_registry.h"

namespace cohort {
namespace {

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

namespace {

// BuildLayers + Model::Create, the parameters not yet initialised.
template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildUninitialized(
    const ModelSpec& spec, const Shape& input_shape) {
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> specs, LayerSpecs(spec));
  ASSIGN_OR_RETURN(const ModelSizes sizes, InferModelSizes(specs, input_shape));
  ASSIGN_OR_RETURN(auto layers, BuildLayers<T>(spec));
  ASSIGN_OR_RETURN(auto model,
                   Model<T>::Create(std::move(layers), input_shape));
  RETURN_IF_ERROR(CheckAgreement(*model, sizes));
  model->set_tensor_names(TensorNames(specs));
  return model;
}

}  // namespace

template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildModel(const ModelSpec& spec,
                                                     const Shape& input_shape,
                                                     uint64_t seed) {
  ASSIGN_OR_RETURN(auto model, BuildUninitialized<T>(spec, input_shape));
  model->InitializeParameters(seed);
  return model;
}

template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildModelToRestore(
    const ModelSpec& spec, const Shape& input_shape, uint64_t seed) {
  ASSIGN_OR_RETURN(auto model, BuildUninitialized<T>(spec, input_shape));
  // A sparse table's row seed is drawn between the dense values, from the
  // same generator: only the whole draw gives the same seeds.
  if (!model->param_store().sparse_entries().empty()) {
    model->InitializeParameters(seed);
  }
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
template absl::StatusOr<std::unique_ptr<Model<float>>>
BuildModelToRestore<float>(const ModelSpec&, const Shape&, uint64_t);
template absl::StatusOr<std::unique_ptr<Model<float>>> BuildModel<float>(
    const ModelSpec&, const Shape&, uint64_t);
template absl::StatusOr<std::unique_ptr<Model<double>>> BuildModel<double>(
    const ModelSpec&, const Shape&, uint64_t);
template absl::StatusOr<std::unique_ptr<Model<float>>> BuildReplica<float>(
    const ModelSpec&, Model<float>&);

}  // namespace cohort
