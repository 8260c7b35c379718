// `cohort import --onnx=FILE --out=JOB`: a model exported by
// torch.onnx.export becomes a job spec of cohort layers
// (common/onnx/onnx_import.h), and optionally a safetensors file of its
// weights under cohort's names for `cohort train --init-from`.
//
// Thread safety: a plain function.
#ifndef COHORT_CLI_IMPORT_COMMAND_H_
#define COHORT_CLI_IMPORT_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort {

// Runs `cohort import ARGS...`: reads the ONNX file, maps it, checks the
// job spec with the spec parser, then writes the weights (if asked) and
// the spec, each atomically. InvalidArgument (exit 2) for bad flags, a
// graph cohort cannot express, or an output that is the input; DataLoss
// for a file that is not an ONNX model. Sets *help when --help was asked
// for (and printed).
absl::Status RunImport(const std::vector<std::string>& args, bool* help);

}  // namespace cohort

#endif  // COHORT_CLI_IMPORT_COMMAND_H_
