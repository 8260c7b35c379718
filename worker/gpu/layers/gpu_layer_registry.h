// The GPU engine's layer kinds: for each LayerSpec kind, the function that
// builds its GPU layer. MakeGpuLayer (gpu_layer_factory.h) builds the layer
// for one spec through them.
//
// Each kind registers its maker from its own file under kinds/ with
// COHORT_REGISTER_GPU_LAYER, keyed by the kind's field number
// (common/layer_kind.h LayerKindNumber), so that adding a kind touches
// neither this registry nor the factory.
//
// Ownership: the caller owns every layer a maker returns. Thread safety:
// registration happens during static initialisation, before main;
// afterwards the registry is read-only and every function here may be
// called concurrently.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_LAYER_REGISTRY_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_LAYER_REGISTRY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/static_registration.h"
#include "proto/job.pb.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

// Builds the GPU layer for spec `l` in `precision`, or says why the spec
// does not make one.
using GpuLayerMaker = absl::StatusOr<std::unique_ptr<GpuLayer>> (*)(
    const LayerSpec& l, Precision precision);

// Registers `maker` (not null) for LayerSpec field `number`; returns true
// so that a static initialiser can call it. Registering a number twice is
// a fatal error.
bool RegisterGpuLayer(int number, GpuLayerMaker maker);

// The maker registered for field `number`; null when none is.
GpuLayerMaker FindGpuLayer(int number);

}  // namespace cohort

// Registers `maker` (a GpuLayerMaker) for LayerSpec field `number` at
// start-up.
#define COHORT_REGISTER_GPU_LAYER(number, maker) \
  COHORT_STATIC_REGISTRATION(::cohort::RegisterGpuLayer(number, maker))

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_LAYER_REGISTRY_H_
