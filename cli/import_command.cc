#include "cli/import_command.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/flags.h"
#include "cli/output_paths.h"
#include "common/files.h"
#include "common/onnx/onnx_import.h"
#include "common/safetensors.h"
#include "common/spec.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// ONNX files over 2 GB keep their weights outside; those are refused.
constexpr int64_t kMaxOnnxBytes = int64_t{2} << 30;

// "3,32,32" as {3, 32, 32}.
absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d <= 0 || d > (int64_t{1} << 31)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input-shape must be positive sizes separated by commas (C,H,W "
          "or F), got \"",
          text, "\""));
    }
    shape.push_back(d);
  }
  return shape;
}

// The outputs may be written and replace none of the inputs.
absl::Status CheckOutputs(const std::string& onnx, const std::string& out,
                          const std::string& weights) {
  CommandInputs inputs;
  inputs.files.push_back({"the --onnx file", onnx});
  RETURN_IF_ERROR(CheckOutputFlag("--out", out, inputs));
  if (weights.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckOutputFlag("--weights", weights, inputs));
  return CheckDistinctOutputs({{"--out", out}, {"--weights", weights}});
}

// The imported model, its messages prefixed with the file's name.
absl::StatusOr<ImportedModel> Import(const std::string& onnx,
                                     const OnnxImportOptions& options) {
  ASSIGN_OR_RETURN(const std::string bytes,
                   ReadRegularFile(onnx, kMaxOnnxBytes, "the --onnx file"));
  absl::StatusOr<ImportedModel> m = ImportOnnxBytes(bytes, options);
  if (!m.ok()) {
    return absl::Status(m.status().code(),
                        absl::StrCat(onnx, ": ", m.status().message()));
  }
  return m;
}

absl::Status WriteOutputs(const ImportedModel& m, const std::string& onnx,
                          const std::string& out, const std::string& weights) {
  const std::string text = ImportedJobText(m, onnx, weights);
  // What is written must load: the spec parser checks every layer's
  // fields and shapes.
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, out);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        onnx,
        ": imports to a model cohort refuses: ", spec.status().message()));
  }
  if (!weights.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(
        weights, SafetensorsBytes(m.weights, {{"source", onnx}})));
  }
  return WriteFileAtomically(out, text);
}

}  // namespace

absl::Status RunImport(const std::vector<std::string>& args, bool* help) {
  std::string onnx, out, weights, input_shape;
  FlagSet flags("import");
  flags.String("onnx", &onnx,
               "the model, as torch.onnx.export wrote it (training mode "
               "keeps BatchNorm and Dropout)",
               "FILE");
  flags.String("out", &out, "the job spec to write", "FILE");
  flags.String("weights", &weights,
               "also write the weights as safetensors under cohort's names, "
               "for cohort train --init-from",
               "FILE");
  flags.String("input-shape", &input_shape,
               "the per-sample input shape where the graph's is symbolic "
               "(default: the graph's)",
               "C,H,W");
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  for (const auto& [value, flag] : {std::pair{&onnx, "onnx"}, {&out, "out"}}) {
    if (value->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " is required"));
    }
  }
  OnnxImportOptions options;
  if (!input_shape.empty()) {
    ASSIGN_OR_RETURN(options.input_shape, ParseShape(input_shape));
  }
  RETURN_IF_ERROR(CheckOutputs(onnx, out, weights));
  ASSIGN_OR_RETURN(const ImportedModel m, Import(onnx, options));
  RETURN_IF_ERROR(WriteOutputs(m, onnx, out, weights));
  int blocks = 0;
  for (const LayerSpec& l : m.model.layers()) blocks += l.has_residual();
  const std::string fused =
      blocks == 0
          ? ""
          : absl::StrCat(" ", blocks, " ResNet block", blocks == 1 ? "" : "s",
                         " as residual layers;");
  std::printf("%s: %d layers, %zu tensors;%s wrote %s%s\n", onnx.c_str(),
              m.model.layers_size(), m.weights.size(), fused.c_str(),
              out.c_str(),
              weights.empty() ? "" : absl::StrCat(" and ", weights).c_str());
  return absl::OkStatus();
}

}  // namespace cohort
