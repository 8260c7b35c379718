// Builds the GPU engine's layer for one layer spec through the makers the
// kinds register (gpu_layer_registry.h), as MakeLayer in
// worker/layer_registry.h does for the CPU layers.
//
// Ownership: the caller owns the layer returned. Thread safety: a plain
// function over its arguments; safe to call from any thread.
#ifndef COHORT_WORKER_GPU_LAYERS_GPU_LAYER_FACTORY_H_
#define COHORT_WORKER_GPU_LAYERS_GPU_LAYER_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "worker/gpu/layers/gpu_layer.h"

namespace cohort {

// The GPU layer for one layer spec (proto/job.proto LayerSpec) in
// `precision`, or INVALID_ARGUMENT when the spec names no layer kind (or
// one this build registers no maker for).
absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGpuLayer(
    const LayerSpec& spec, Precision precision = FP32);

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_LAYER_FACTORY_H_
