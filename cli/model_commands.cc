#include "cli/model_commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/flags.h"
#include "cli/generate.h"
#include "common/files.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "worker/data/dataset.h"
#include "worker/data/npy.h"
#include "worker/model_eval.h"
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
  if (array.type() != NpyType::kFloat32 && array.type() != NpyType::kFloat16 &&
      array.type() != NpyType::kUint8) {
    return absl::InvalidArgumentError(
        absl::StrCat(array.path(), ": inputs are ", NpyTypeName(array.type()),
                     "; use float32, float16 or uint8"));
  }
  std::vector<float> out(s[0] * NumElements(want));
  NpyToFloats(array.type(), array.data(), out.size(), out.data());
  return out;
}

}  // namespace

absl::Status ExportCheckpoint(const std::string& checkpoint,
                              const std::string& format,
                              const std::string& out) {
  ASSIGN_OR_RETURN(TrainedModel trained, LoadTrainedModel(checkpoint));
  if (format == "onnx") {
    ASSIGN_OR_RETURN(const std::string bytes, OnnxModelBytes(trained));
    RETURN_IF_ERROR(WriteFileAtomically(out, bytes));
    std::printf(
        "wrote %s: ONNX opset %d, input \"input\" [batch, %s], the "
        "step-%lld model in %s\n",
        out.c_str(), kOnnxOpset,
        absl::StrJoin(trained.input_shape, ", ").c_str(),
        static_cast<long long>(trained.step), checkpoint.c_str());
    return absl::OkStatus();
  }
  const std::vector<SafeTensor> tensors = StateDict(trained);
  ASSIGN_OR_RETURN(const std::string layers, LayersJson(trained));
  const std::map<std::string, std::string> metadata = {
      {"cohort.layers", layers},
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

absl::Status RunExport(const std::vector<std::string>& args, bool* help) {
  std::string checkpoint, format, out;
  FlagSet flags("export");
  flags.String("checkpoint", &checkpoint,
               "a checkpoint file (ckpt-*.cohort), or a directory: its newest "
               "(DIR/best: the best of keep_best)");
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
  return ExportCheckpoint(checkpoint, format, out);
}

namespace {

// The split of the checkpoint's data set named by --split.
absl::StatusOr<std::unique_ptr<Dataset>> LoadSplit(const TrainedModel& t,
                                                   const std::string& data_dir,
                                                   const std::string& split) {
  if (split != "test" && split != "train") {
    return absl::InvalidArgumentError(
        absl::StrCat("--split must be test or train, got \"", split, "\""));
  }
  ASSIGN_OR_RETURN(DataSplits splits,
                   LoadDataset(t.spec.data(), data_dir, t.spec.seed()));
  return split == "test" ? std::move(splits.test) : std::move(splits.train);
}

// "index,label,class_1,prob_1,...": each sample's top `k` classes with
// their softmax probabilities.
std::string TopKRows(int64_t first, const Tensor& out, const Batch& b,
                     int64_t k) {
  const int64_t n = b.size(), classes = out.size() / n;
  std::string rows;
  std::vector<int64_t> order(classes);
  std::vector<double> p(classes);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = out.data() + i * classes;
    const float m = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += p[j] = std::exp(row[j] - m);
    std::iota(order.begin(), order.end(), int64_t{0});
    const int64_t top = std::min(k, classes);
    std::partial_sort(order.begin(), order.begin() + top, order.end(),
                      [&](int64_t a, int64_t c) {
                        return p[a] > p[c] || (p[a] == p[c] && a < c);
                      });
    absl::StrAppend(&rows, first + i, ",", b.labels.empty() ? -1 : b.labels[i]);
    for (int64_t j = 0; j < top; ++j) {
      absl::StrAppend(&rows, ",", order[j], ",",
                      absl::StrFormat("%.6g", p[order[j]] / sum));
    }
    rows += "\n";
  }
  return rows;
}

absl::Status PredictArray(TrainedModel& trained, const std::string& input,
                          const std::string& out, int64_t batch) {
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

// Every sample of a split: a CSV of top-k classes, or (.npy) raw outputs.
absl::Status PredictSplit(TrainedModel& trained, const Dataset& data,
                          const std::string& out, int64_t batch,
                          int64_t top_k) {
  const bool npy = absl::EndsWith(out, ".npy");
  if (!npy && data.float_targets()) {
    return absl::InvalidArgumentError(
        "--out: a model with float targets writes raw outputs: name a .npy "
        "file");
  }
  std::string csv = "index,label";
  for (int64_t j = 1; j <= top_k; ++j) {
    absl::StrAppend(&csv, ",class_", j, ",prob_", j);
  }
  csv += "\n";
  std::vector<float> all;
  RETURN_IF_ERROR(ForEachPrediction(
      trained, data, batch,
      [&](int64_t first, const Tensor& outputs, const Batch& b) {
        if (npy) {
          all.insert(all.end(), outputs.data(),
                     outputs.data() + outputs.size());
        } else {
          csv += TopKRows(first, outputs, b, top_k);
        }
      }));
  if (npy) {
    std::vector<int64_t> shape = {data.size()};
    const Shape& o = trained.model->output_shape();
    shape.insert(shape.end(), o.begin(), o.end());
    RETURN_IF_ERROR(
        WriteFileAtomically(out, NpyFloat32Bytes(shape, all.data())));
  } else {
    RETURN_IF_ERROR(WriteFileAtomically(out, csv));
  }
  std::printf("wrote %s: predictions for %lld samples\n", out.c_str(),
              static_cast<long long>(data.size()));
  return absl::OkStatus();
}

// `cohort predict --prompt`: text generation (cli/generate.h).
absl::Status RunGenerate(const std::string& checkpoint,
                         const std::string& prompt, int64_t generate,
                         const std::string& temperature, int64_t top_k,
                         int64_t seed) {
  RETURN_IF_ERROR(Required(checkpoint, "checkpoint"));
  if (prompt.empty()) {
    return absl::InvalidArgumentError(
        "--generate needs --prompt: the text to continue");
  }
  GenerateOptions o;
  o.tokens = generate;
  o.top_k = top_k < 0 ? 0 : top_k;
  o.seed = static_cast<uint64_t>(seed);
  if (!absl::SimpleAtod(temperature, &o.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--temperature must be a finite number >= 0 (0: greedy), got \"",
        temperature, "\""));
  }
  // Refuse bad options before the checkpoint is read.
  RETURN_IF_ERROR(CheckGenerateOptions(o, INT32_MAX));
  ASSIGN_OR_RETURN(TrainedModel trained, LoadTrainedModel(checkpoint));
  return GenerateText(trained, prompt, o);
}

}  // namespace

absl::Status RunPredict(const std::vector<std::string>& args, bool* help) {
  std::string checkpoint, input, out, data_dir, split = "test";
  int64_t batch = 256, top_k = -1;  // -1: not given
  std::string prompt, temperature = "1", generate_flag;
  int64_t generate = 0, seed = 0;
  FlagSet flags("predict");
  flags.String("checkpoint", &checkpoint,
               "a checkpoint file (ckpt-*.cohort), or a directory: its newest "
               "(DIR/best: the best of keep_best)");
  flags.String("input", &input,
               ".npy file of inputs [N, *sample shape] (float32, float16, "
               "or uint8 divided by 255); without it, a split of the "
               "checkpoint's data set");
  flags.String("data-dir", &data_dir,
               "the data set's directory (overrides the spec's)");
  flags.String("split", &split, "test or train (without --input)");
  flags.String("out", &out,
               ".npy for raw outputs, or .csv for each sample's top-k "
               "classes with probabilities");
  flags.Int("batch", &batch, "samples per forward pass", 1, 1 << 20);
  flags.Int("top-k", &top_k,
            "classes per sample in a .csv (default 5); with --prompt, sample "
            "only among the K most likely tokens (default 0: all)",
            0, INT32_MAX);
  flags.String("prompt", &prompt,
               "text to continue: its bytes are the token ids (a TOKENS "
               "checkpoint in format BYTES); prints it and --generate bytes");
  // Parsed by ParseGenerateFlag, whose message tells an integer out of
  // range from one that is not an integer.
  flags.String("generate", &generate_flag,
               "with --prompt: N, the bytes to generate");
  flags.String("temperature", &temperature,
               "with --prompt: softmax temperature (0: greedy)");
  flags.Int("seed", &seed, "with --prompt: the sampler's seed");
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (!generate_flag.empty()) {
    ASSIGN_OR_RETURN(generate, ParseGenerateFlag(generate_flag));
  }
  if (!prompt.empty() || generate != 0) {
    return RunGenerate(checkpoint, prompt, generate, temperature, top_k, seed);
  }
  if (top_k < 0) top_k = 5;
  if (top_k < 1 || top_k > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--top-k must be an integer in [1, 1000] for a .csv, got ", top_k));
  }
  RETURN_IF_ERROR(Required(checkpoint, "checkpoint"));
  RETURN_IF_ERROR(Required(out, "out"));
  if (!absl::EndsWith(out, ".npy") && !absl::EndsWith(out, ".csv")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out must end in .npy (raw outputs) or .csv (top-k classes), got ",
        out));
  }
  if (!input.empty() && absl::EndsWith(out, ".csv")) {
    return absl::InvalidArgumentError(
        "--out: predictions on an --input array are written as .npy");
  }
  if (absl::Status s = CheckCanWriteFile(out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--out: ", s.message()));
  }
  ASSIGN_OR_RETURN(TrainedModel trained, LoadTrainedModel(checkpoint));
  if (!input.empty()) return PredictArray(trained, input, out, batch);
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> data,
                   LoadSplit(trained, data_dir, split));
  return PredictSplit(trained, *data, out, batch, top_k);
}

absl::Status RunEvaluate(const std::vector<std::string>& args, bool* help) {
  std::string checkpoint, data_dir, split = "test", confusion;
  int64_t batch = 256;
  FlagSet flags("evaluate");
  flags.String("checkpoint", &checkpoint,
               "a checkpoint file (ckpt-*.cohort), or a directory: its newest "
               "(DIR/best: the best of keep_best)");
  flags.String("data-dir", &data_dir,
               "the data set's directory (overrides the spec's)");
  flags.String("split", &split, "test or train");
  flags.String("confusion", &confusion,
               "write the confusion matrix (rows: true class, columns: "
               "predicted) to this CSV file; up to 100 classes");
  flags.Int("batch", &batch, "samples per forward pass", 1, 1 << 20);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Required(checkpoint, "checkpoint"));
  if (!confusion.empty()) {
    if (absl::Status s = CheckCanWriteFile(confusion); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--confusion: ", s.message()));
    }
  }
  ASSIGN_OR_RETURN(TrainedModel trained, LoadTrainedModel(checkpoint));
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> data,
                   LoadSplit(trained, data_dir, split));
  ASSIGN_OR_RETURN(const SplitEvaluation e,
                   EvaluateSplit(trained, *data, batch));
  std::string line;
  for (const auto& [name, value] : e.metrics) {
    absl::StrAppend(&line, line.empty() ? "" : " | ", name, " ",
                    absl::StrFormat("%.6g", value));
  }
  std::printf("%s split, %lld samples, step %lld: %s\n", split.c_str(),
              static_cast<long long>(e.samples),
              static_cast<long long>(trained.step), line.c_str());
  if (confusion.empty()) return absl::OkStatus();
  const int64_t k = data->num_classes();
  if (k == 0 || k > 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--confusion: a confusion matrix needs class labels and at most 100 "
        "classes; this data set has ",
        k == 0 ? "float targets" : absl::StrCat(k, " classes")));
  }
  std::string csv = "true\\predicted";
  for (int64_t j = 0; j < k; ++j) absl::StrAppend(&csv, ",", j);
  csv += "\n";
  for (int64_t i = 0; i < k; ++i) {
    absl::StrAppend(&csv, i);
    for (int64_t j = 0; j < k; ++j) {
      absl::StrAppend(&csv, ",", e.confusion[i * k + j]);
    }
    csv += "\n";
  }
  RETURN_IF_ERROR(WriteFileAtomically(confusion, csv));
  std::printf("wrote %s: the %lldx%lld confusion matrix\n", confusion.c_str(),
              static_cast<long long>(k), static_cast<long long>(k));
  return absl::OkStatus();
}

}  // namespace cohort
