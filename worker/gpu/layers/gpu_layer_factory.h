// Builds the GPU engine's layer for one layer spec, as MakeLayer in
// worker/zoo.cc does for the CPU layers.
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
// `precision`, or INVALID_ARGUMENT when the spec names no layer kind.
absl::StatusOr<std::unique_ptr<GpuLayer>> MakeGpuLayer(
    const LayerSpec& spec, Precision precision = FP32);

}  // namespace cohort

#endif  // COHORT_WORKER_GPU_LAYERS_GPU_LAYER_FACTORY_H_
