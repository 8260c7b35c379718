// `model { onnx: "FILE" }`: reading a job spec maps the graph onto layers
// (common/onnx/onnx_import.h), so that every process that reads the spec
// (coordinator, workers, export) sees the same layer list, checked like a
// written one.
//
// Internal to common's spec library. Thread safety: plain functions.
#ifndef COHORT_COMMON_SPEC_ONNX_H_
#define COHORT_COMMON_SPEC_ONNX_H_

#include <string>

#include "absl/status/status.h"
#include "common/spec_scope.h"
#include "proto/job.pb.h"

namespace cohort {
namespace spec_internal {

// When `spec` (read from `filename`, in scope `s`) names an ONNX graph and
// no layers, fills model.layers from it and makes model.onnx absolute.
// Layers given beside it are a spec already read (a checkpoint's copy):
// kept as they are, the file not read. InvalidArgument naming the field
// and the file for a graph that cannot be read or mapped.
absl::Status ReadOnnxModel(JobSpec* spec, const std::string& filename,
                           const Scope& s);

}  // namespace spec_internal
}  // namespace cohort

#endif  // COHORT_COMMON_SPEC_ONNX_H_
