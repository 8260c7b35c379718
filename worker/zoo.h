// Builds models: the named zoo models (common/zoo_specs.h lists them and
// their input shapes) and user-defined layer lists.
//
// Every model is sized by the checked shape inference (common/model_sizes.h)
// before its buffers are allocated, and its configured layers must agree
// with that inference, so the sizes the spec validator and the memory
// estimate saw are the sizes the model has.
//
// All functions are thread-safe (they share no state).
#ifndef COHORT_WORKER_ZOO_H_
#define COHORT_WORKER_ZOO_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/zoo_specs.h"  // ZooModelNames, ZooInputShape, LayerSpecs
#include "proto/job.pb.h"
#include "worker/model.h"

namespace cohort {

// The layers for `spec` (a zoo name or an explicit list), unconfigured.
// NotFound lists the zoo names when the name is unknown.
template <typename T>
absl::StatusOr<typename Model<T>::LayerList> BuildLayers(const ModelSpec& spec);

// BuildLayers + Model::Create + initialisation from `seed`. The inference
// runs first: InvalidArgument naming the layer when an input does not fit
// or a size passes int64_t, before anything is allocated; Internal when
// the layers' own configuration disagrees with it (a bug).
template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildModel(const ModelSpec& spec,
                                                     const Shape& input_shape,
                                                     uint64_t seed);

// BuildModel for a caller that restores every dense parameter at once (a
// checkpoint): their initial values are not drawn (ResNet-50's 25 million
// took a fifth of a second of each `cohort predict`) and are unspecified
// until then. A model with sparse tables is initialised in full, since
// their rows' seeds come from the same draws.
template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildModelToRestore(
    const ModelSpec& spec, const Shape& input_shape, uint64_t seed);

// A replica of `owner` sharing its parameters (see Model::CreateReplica).
template <typename T>
absl::StatusOr<std::unique_ptr<Model<T>>> BuildReplica(const ModelSpec& spec,
                                                       Model<T>& owner);

}  // namespace cohort

#endif  // COHORT_WORKER_ZOO_H_
