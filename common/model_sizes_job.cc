// The job-level entry points of common/model_sizes.h: the data set's sample
// shape from its spec, and a job's model sizes on it.
#include "absl/strings/str_cat.h"
#include "common/model_sizes.h"
#include "common/status_macros.h"
#include "common/zoo_specs.h"

namespace cohort {

Shape DataSampleShape(const DatasetSpec& data) {
  switch (data.kind()) {
    case DatasetSpec::MNIST:
      return {1, 28, 28};
    case DatasetSpec::CIFAR10:
      return {3, 32, 32};
    case DatasetSpec::NUMPY:
      return Shape(data.numpy().shape().begin(), data.numpy().shape().end());
    case DatasetSpec::CSV:
      return {data.csv().features()};
    case DatasetSpec::TOKENS:
      return {1, data.tokens().context()};
    case DatasetSpec::CRITEO: {
      // Dense features, then a pair of floats per categorical row id.
      const CriteoSpec& c = data.criteo();
      const int64_t dense = c.dense() > 0 ? c.dense() : 13;
      const int64_t categorical = c.categorical() > 0 ? c.categorical() : 26;
      return {dense + 2 * categorical};
    }
    case DatasetSpec::IMAGE_FOLDER: {
      const ImageFolderSpec& f = data.image_folder();
      const int64_t side = f.image_size() > 0 ? f.image_size() : 224;
      return {f.grayscale() ? 1 : 3, side, side};
    }
    default:
      break;
  }
  const auto& shape = data.synthetic().shape();
  if (shape.empty()) return {1, 28, 28};
  return Shape(shape.begin(), shape.end());
}

absl::StatusOr<ModelSizes> InferJobModelSizes(const JobSpec& spec,
                                              int* failed_layer) {
  if (failed_layer != nullptr) *failed_layer = -1;
  const Shape input = DataSampleShape(spec.data());
  if (!spec.model().zoo().empty()) {
    ASSIGN_OR_RETURN(const Shape want,
                     ZooInputShape(spec.model().zoo(), input));
    if (want != input) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zoo model ", spec.model().zoo(), " takes samples of shape ",
          ShapeString(want), " but the data set gives ", ShapeString(input)));
    }
  }
  ASSIGN_OR_RETURN(const std::vector<LayerSpec> layers,
                   LayerSpecs(spec.model()));
  return InferModelSizes(layers, input, failed_layer);
}

}  // namespace cohort
