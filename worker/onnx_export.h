// A trained model as an ONNX graph (opset 13), in inference form: BatchNorm
// with its running statistics, dropout removed, residual blocks as
// Conv/BatchNormalization/Relu with an Add, a named input ("input",
// [batch, *sample shape]) and output ("output"), and a symbolic batch
// dimension. Written with the ONNX protobuf messages of Debian's
// libonnx-dev, not by hand.
//
// The input is what the model was trained on: the data set's samples after
// its normalisation (the model's metadata says which); nothing is folded in.
//
// Thread safety: a plain function over a model the caller owns.
#ifndef COHORT_WORKER_ONNX_EXPORT_H_
#define COHORT_WORKER_ONNX_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "worker/trained_model.h"

namespace cohort {

// The serialized ModelProto. Unimplemented naming the layer for a kind
// without an ONNX form (none today).
absl::StatusOr<std::string> OnnxModelBytes(TrainedModel& trained);

}  // namespace cohort

#endif  // COHORT_WORKER_ONNX_EXPORT_H_
