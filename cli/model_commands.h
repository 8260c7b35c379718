// Using a trained model outside training: `cohort export` (a checkpoint's
// model as safetensors with PyTorch's names) and `cohort predict` (the
// model's outputs on an array of inputs).
#ifndef COHORT_CLI_MODEL_COMMANDS_H_
#define COHORT_CLI_MODEL_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort {

// Writes the model of `checkpoint` (a file, or a directory whose newest
// checkpoint verifies; one with damaged newer ones is refused) to `out` as
// `format` ("onnx" or "safetensors"); prints one line saying what it wrote.
absl::Status ExportCheckpoint(const std::string& checkpoint,
                              const std::string& format,
                              const std::string& out);

// `cohort export --checkpoint=FILE --format=onnx|safetensors --out=FILE`.
// With --checkpoint=DIR whose newest checkpoints do not verify, refused
// unless --skip-damaged (then stderr names each one skipped and the one
// used); predict and evaluate take the same flag. Every output flag is
// checked first (cli/output_paths.h).
absl::Status RunExport(const std::vector<std::string>& args, bool* help);

// `cohort predict --checkpoint=FILE --input=X.npy --out=Y.npy`, or over a
// split of the checkpoint's data set with --out=FILE.csv (top-k classes)
// or FILE.npy (raw outputs); with --prompt=TEXT --generate=N, text sampled
// from a language model's checkpoint (cli/generate.h).
absl::Status RunPredict(const std::vector<std::string>& args, bool* help);

// `cohort evaluate --checkpoint=FILE [--split=test] [--confusion=CSV]`:
// the job's metrics on a split of its data set.
absl::Status RunEvaluate(const std::vector<std::string>& args, bool* help);

}  // namespace cohort

#endif  // COHORT_CLI_MODEL_COMMANDS_H_
