// The CPU engine's layer kinds: for each LayerSpec kind, the functions that
// build its layer in float and in double, and MakeLayer, which builds the
// layer for one spec through them.
//
// Each kind registers its makers from its own file under
// worker/layer_kinds/ with COHORT_REGISTER_CPU_LAYER, keyed by the kind's
// field number (common/layer_kind.h LayerKindNumber), so that adding a kind
// touches neither this registry nor the zoo.
//
// Ownership: the caller owns every layer a maker returns. Thread safety:
// registration happens during static initialisation, before main;
// afterwards the registry is read-only and every function here may be
// called concurrently.
#ifndef COHORT_WORKER_LAYER_REGISTRY_H_
#define COHORT_WORKER_LAYER_REGISTRY_H_

#include <memory>

#include "common/static_registration.h"
#include "proto/job.pb.h"
#include "worker/layers/layer.h"

namespace cohort {

// Builds the layer for spec `l`, unconfigured; null when `l` cannot be
// built (a branch with a path of such layers).
template <typename T>
using CpuLayerMaker = std::unique_ptr<Layer<T>> (*)(const LayerSpec& l);

struct CpuLayerMakers {
  CpuLayerMaker<float> make_float = nullptr;
  CpuLayerMaker<double> make_double = nullptr;
};

// Registers `makers` (both set) for LayerSpec field `number`; returns true
// so that a static initialiser can call it. Registering a number twice is
// a fatal error.
bool RegisterCpuLayer(int number, const CpuLayerMakers& makers);

// The makers registered for field `number`; null when none are.
const CpuLayerMakers* FindCpuLayer(int number);

// The layer for `l`, unconfigured; null when `l` names no kind or its kind
// has no registered makers (a build that left its file out).
template <typename T>
std::unique_ptr<Layer<T>> MakeLayer(const LayerSpec& l);

}  // namespace cohort

// Registers the function template `maker` (template <typename T>
// std::unique_ptr<Layer<T>> maker(const LayerSpec&)) for LayerSpec field
// `number` at start-up, in float and double.
#define COHORT_REGISTER_CPU_LAYER(number, maker)         \
  COHORT_STATIC_REGISTRATION(::cohort::RegisterCpuLayer( \
      number, ::cohort::CpuLayerMakers{&maker<float>, &maker<double>}))

#endif  // COHORT_WORKER_LAYER_REGISTRY_H_
