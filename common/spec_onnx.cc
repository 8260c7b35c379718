#include "common/spec_onnx.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/onnx/onnx_import.h"

namespace cohort {
namespace spec_internal {
namespace {

// Protocol Buffers cannot parse a message past 2 GiB.
constexpr int64_t kMaxOnnxBytes = int64_t{2} << 30;

// `path` as written, or under the directory of the spec that names it.
std::string Resolve(const std::string& path, const std::string& filename) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.is_relative()) p = fs::path(filename).parent_path() / p;
  std::error_code ec;
  const fs::path absolute = fs::absolute(p, ec);
  return (ec ? p : absolute).lexically_normal().string();
}

}  // namespace

absl::Status ReadOnnxModel(JobSpec* spec, const std::string& filename,
                           const Scope& s) {
  ModelSpec* model = spec->mutable_model();
  if (model->onnx().empty() || model->layers_size() > 0) {
    return absl::OkStatus();
  }
  const Scope at = s.Nested(*spec, "model", -1);
  if (!model->zoo().empty()) {
    return at.Error(*model, "zoo", -1,
                    absl::StrCat("must be empty when onnx is given, got \"",
                                 model->zoo(), "\""));
  }
  const std::string path = Resolve(model->onnx(), filename);
  absl::StatusOr<std::string> bytes =
      ReadRegularFile(path, kMaxOnnxBytes, "ONNX model");
  absl::StatusOr<ImportedModel> imported =
      bytes.ok() ? ImportOnnxBytes(*bytes, OnnxImportOptions())
                 : absl::StatusOr<ImportedModel>(bytes.status());
  if (!imported.ok()) {
    return at.Error(
        *model, "onnx", -1,
        absl::StrCat("\"", model->onnx(), "\": ", imported.status().message()));
  }
  *model->mutable_layers() = imported->model.layers();
  model->set_onnx(path);
  return absl::OkStatus();
}

}  // namespace spec_internal
}  // namespace cohort
