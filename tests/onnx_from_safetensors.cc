// Exports a safetensors file to ONNX through worker/onnx_export.h without
// building an engine model: the layer list and input shape come from the
// file's metadata (cohort.layers, cohort.input_shape, as `cohort export
// --format=safetensors` writes them and tests/transformer_torch.py writes
// for a model PyTorch built). So the exporter can be checked against
// PyTorch for layers the engine does not need to run.
//
//   onnx_from_safetensors IN.safetensors OUT.onnx
//
// Prints one line; exits 1 with the reason on failure.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/job.pb.h"
#include "worker/onnx_export.h"

namespace cohort {
namespace {

absl::StatusOr<std::string> Meta(const SafetensorsFile& f,
                                 const std::string& key,
                                 const std::string& path) {
  auto it = f.metadata.find(key);
  if (it == f.metadata.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no metadata ", key));
  }
  return it->second;
}

// "[1, 16]" -> {1, 16}.
absl::StatusOr<Shape> ParseShape(std::string text, const std::string& path) {
  absl::string_view s = text;
  absl::ConsumePrefix(&s, "[");
  absl::ConsumeSuffix(&s, "]");
  Shape shape;
  for (absl::string_view d : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": cohort.input_shape \"", text, "\" is not [d, ...]"));
    }
    shape.push_back(v);
  }
  return shape;
}

absl::Status Run(const std::string& in, const std::string& out) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFile(in));
  ASSIGN_OR_RETURN(const SafetensorsFile file, ParseSafetensors(bytes, in));
  ASSIGN_OR_RETURN(const std::string layers, Meta(file, "cohort.layers", in));
  ASSIGN_OR_RETURN(const std::string shape,
                   Meta(file, "cohort.input_shape", in));
  ModelSpec model;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      absl::StrCat("{\"layers\": ", layers, "}"), &model);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(in, ": cohort.layers: ", parsed.message().as_string()));
  }
  OnnxSource source;
  source.name = "from_safetensors";
  source.layers.assign(model.layers().begin(), model.layers().end());
  ASSIGN_OR_RETURN(source.input_shape, ParseShape(shape, in));
  // The floats live here while the graph is built.
  std::map<std::string, std::vector<float>> values;
  for (const auto& [name, t] : file.tensors) {
    if (t.dtype == "I64") continue;  // BatchNorm's num_batches_tracked
    ASSIGN_OR_RETURN(values[name], SafeTensorFloats(t));
    source.tensors[name] = {values[name].data(), t.shape};
  }
  ASSIGN_OR_RETURN(const std::string onnx, OnnxModelBytes(source));
  RETURN_IF_ERROR(WriteFileAtomically(out, onnx));
  std::printf("wrote %s: ONNX opset %d, %zu tensors, %d layers\n", out.c_str(),
              kOnnxOpset, source.tensors.size(), model.layers_size());
  return absl::OkStatus();
}

}  // namespace
}  // namespace cohort

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: onnx_from_safetensors IN.safetensors OUT.onnx\n");
    return 2;
  }
  const absl::Status s = cohort::Run(argv[1], argv[2]);
  if (!s.ok()) {
    std::fprintf(stderr, "onnx_from_safetensors: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
