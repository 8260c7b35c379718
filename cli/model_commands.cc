#include "cli/model_commands.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/flags.h"
#include "common/files.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "worker/data/npy.h"
#include "worker/onnx_export.h"
#include "worker/trained_model.h"

namespace cohort {
namespace {

absl::Status Required(const std::string& value, const char* flag) {
  if (!value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
}

// Inputs of `array` (float32, float16 or uint8 / 255, as training reads
// them) as floats, checked against the model's per-sample shape.
absl::StatusOr<std::vector<float>> Inputs(const NpyArray& array,
                                          const Shape& want) {
  const std::vector<int64_t>& s = array.shape();
  if (s.size() != want.size() + 1 ||
      !std::equal(want.begin(), want.end(), s.begin() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        array.path(), ": inputs of shape (", absl::StrJoin(s, ", "),
        ") where the model takes (N, ", absl::StrJoin(want, ", "), ")"));
  }
  const int64_t n = s[0] * NumElements(want);
  std::vector<float> out(n);
  const uint8_t* p = array.data();
  switch (array.type()) {
    case NpyType::kFloat32:
      std::memcpy(out.data(), p, n * sizeof(float));
      return out;
    case NpyType::kFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
      return out;
    case NpyType::kUint8:
      for (int64_t i = 0; i < n; ++i) out[i] = p[i] / 255.0f;
      return out;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(array.path(), ": inputs are ", NpyTypeName(array.type()),
                       "; use float32, float16 or uint8"));
  }
}

}  // namespace

absl::Status RunExport(const std::vector<std::string>& args, bool* help) {
  std::string checkpoint, format, out;
  FlagSet flags("export");
  flags.String("checkpoint", &checkpoint, "a checkpoint file (ckpt-*.cohort)");
  flags.String("format", &format, "onnx or safetensors");
  flags.String("out", &out, "the file to write");
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Required(checkpoint, "checkpoint"));
  RETURN_IF_ERROR(Required(out, "out"));
  if (format != "safetensors" && format != "onnx") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--format must be onnx or safetensors, got \"", format, "\""));
  }
  if (absl::Status s = CheckCanWriteFile(out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--out: ", s.message()));
  }
  ASSIGN_OR_RETURN(TrainedModel trained, LoadTrainedModel(checkpoint));
  if (format == "onnx") {
    ASSIGN_OR_RETURN(const std::string bytes, OnnxModelBytes(trained));
    RETURN_IF_ERROR(WriteFileAtomically(out, bytes));
    std::printf(
        "wrote %s: ONNX opset 13, input \"input\" [batch, %s], the "
        "step-%lld model in %s\n",
        out.c_str(), absl::StrJoin(trained.input_shape, ", ").c_str(),
        static_cast<long long>(trained.step), checkpoint.c_str());
    return absl::OkStatus();
  }
  const std::vector<SafeTensor> tensors = StateDict(trained);
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"cohort.job_spec", trained.spec_text},
      {"cohort.input_shape",
       absl::StrCat("[", absl::StrJoin(trained.input_shape, ", "), "]")},
      {"cohort.step", absl::StrCat(trained.step)},
  };
  RETURN_IF_ERROR(
      WriteFileAtomically(out, SafetensorsBytes(tensors, metadata)));
  std::printf("wrote %s: %zu tensors of the step-%lld model in %s\n",
              out.c_str(), tensors.size(), static_cast<long long>(trained.step),
              checkpoint.c_str());
  return absl::OkStatus();
}

absl::Status RunPredict(const std::vector<std::string>& args, bool* help) {
  std::string checkpoint, input, out;
  int64_t batch = 256;
  FlagSet flags("predict");
  flags.String("checkpoint", &checkpoint, "a checkpoint file (ckpt-*.cohort)");
  flags.String("input", &input,
               ".npy file of inputs [N, *sample shape] (float32, float16, "
               "or uint8 divided by 255)");
  flags.String("out", &out, ".npy file for the outputs [N, *output shape]");
  flags.Int("batch", &batch, "samples per forward pass", 1, 1 << 20);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Required(checkpoint, "checkpoint"));
  RETURN_IF_ERROR(Required(input, "input"));
  RETURN_IF_ERROR(Required(out, "out"));
  if (absl::Status s = CheckCanWriteFile(out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--out: ", s.message()));
  }
  ASSIGN_OR_RETURN(TrainedModel trained, LoadTrainedModel(checkpoint));
  ASSIGN_OR_RETURN(std::unique_ptr<NpyArray> array, NpyArray::Open(input));
  ASSIGN_OR_RETURN(const std::vector<float> x,
                   Inputs(*array, trained.input_shape));
  const int64_t n = array->shape()[0];
  const std::vector<float> y = Predict(trained, x.data(), n, batch);
  std::vector<int64_t> shape = {n};
  const Shape& o = trained.model->output_shape();
  shape.insert(shape.end(), o.begin(), o.end());
  RETURN_IF_ERROR(WriteFileAtomically(out, NpyFloat32Bytes(shape, y.data())));
  std::printf("wrote %s: outputs [%s] of the step-%lld model\n", out.c_str(),
              absl::StrJoin(shape, ", ").c_str(),
              static_cast<long long>(trained.step));
  return absl::OkStatus();
}

}  // namespace cohort
