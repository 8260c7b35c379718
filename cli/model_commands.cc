#include "cli/model_commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/flags.h"
#include "cli/generate.h"
#include "cli/output_paths.h"
#include "common/files.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "worker/compute_threads.h"
#include "worker/data/dataset.h"
#include "worker/data/image_folder_dataset.h"
#include "worker/data/npy.h"
#include "worker/model_eval.h"
#include "worker/onnx_export.h"
#include "worker/predict.h"
#include "worker/trained_model.h"

namespace cohort {
namespace {

constexpr char kOutHelp[] =
    "the file to write: a new file or a regular one to replace (a device, "
    "FIFO or symbolic link there is refused, as is a file the command "
    "reads)";

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

constexpr char kSkipDamagedHelp[] =
    "with a --checkpoint directory whose newest checkpoints are damaged: "
    "use the newest that verifies, naming each skipped one on stderr "
    "(default: refuse, so that an older model never passes unnoticed for "
    "the newest)";

// The model of --checkpoint (a file, or a directory's newest checkpoint).
// A directory whose newest checkpoints do not verify is refused unless
// `skip_damaged`: exporting or scoring an older model than the one asked
// for is a wrong answer nobody would notice. With it, stderr names each
// damaged checkpoint and the one used.
absl::StatusOr<TrainedModel> LoadModel(const std::string& checkpoint,
                                       bool skip_damaged,
                                       absl::string_view command) {
  ASSIGN_OR_RETURN(FoundCheckpoint found, FindCheckpoint(checkpoint));
  const std::string used =
      absl::StrCat(found.path, " (step ", found.checkpoint.step, ")");
  if (!found.skipped.empty() && !skip_damaged) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the newest checkpoint in ", checkpoint, " does not verify (",
        absl::StrJoin(found.skipped, "; "), "); the newest that does is ", used,
        ": pass --skip-damaged to use it"));
  }
  for (const std::string& why : found.skipped) {
    std::fprintf(stderr, "cohort %s: warning: skipping damaged checkpoint %s\n",
                 std::string(command).c_str(), why.c_str());
  }
  if (!found.skipped.empty()) {
    std::fprintf(stderr,
                 "cohort %s: warning: using %s, the newest checkpoint in %s "
                 "that verifies\n",
                 std::string(command).c_str(), used.c_str(),
                 checkpoint.c_str());
  }
  return RebuildTrainedModel(found.checkpoint, found.path);
}

// Writes `trained` to `out` as `format`; prints one line saying what.
absl::Status ExportModel(TrainedModel& trained, const std::string& format,
                         const std::string& out) {
  if (format == "onnx") {
    ASSIGN_OR_RETURN(const std::string bytes, OnnxModelBytes(trained));
    RETURN_IF_ERROR(WriteFileAtomically(out, bytes));
    std::printf(
        "wrote %s: ONNX opset %d, input \"input\" [batch, %s], the "
        "step-%lld model in %s\n",
        out.c_str(), kOnnxOpset,
        absl::StrJoin(trained.input_shape, ", ").c_str(),
        static_cast<long long>(trained.step), trained.source.c_str());
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
              trained.source.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::Status ExportCheckpoint(const std::string& checkpoint,
                              const std::string& format,
                              const std::string& out) {
  ASSIGN_OR_RETURN(TrainedModel trained,
                   LoadModel(checkpoint, false, "export"));
  return ExportModel(trained, format, out);
}

absl::Status RunExport(const std::vector<std::string>& args, bool* help) {
  std::string checkpoint, format, out;
  bool skip_damaged = false;
  FlagSet flags("export");
  flags.String("checkpoint", &checkpoint,
               "a checkpoint file (ckpt-*.cohort), or a directory: its newest "
               "(DIR/best: the best of keep_best)",
               "PATH");
  flags.String("format", &format, "the output format", "onnx|safetensors");
  flags.String("out", &out, kOutHelp, "FILE");
  flags.Bool("skip-damaged", &skip_damaged, kSkipDamagedHelp);
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
  CommandInputs inputs;
  inputs.AddCheckpoint(checkpoint);
  RETURN_IF_ERROR(CheckOutputFlag("--out", out, inputs));
  ASSIGN_OR_RETURN(TrainedModel trained,
                   LoadModel(checkpoint, skip_damaged, "export"));
  return ExportModel(trained, format, out);
}

namespace {

// A split of the checkpoint's data set, and its classes' names where the
// data set has them.
struct Split {
  std::unique_ptr<Dataset> data;
  // By label: an image folder's class folders. Empty: only numbers.
  std::vector<std::string> class_names;
};

// An image folder's class names: the folder of each label's files (every
// class folder of the training folder holds some, so the train split
// names them all).
std::vector<std::string> ClassNames(const Dataset& train) {
  const auto* folder = dynamic_cast<const ImageFolderDataset*>(&train);
  if (folder == nullptr) return {};
  std::vector<std::string> names(folder->num_classes());
  for (const ImageFile& f : folder->files()) {
    if (f.label < 0 || f.label >= static_cast<int>(names.size())) continue;
    std::string& name = names[f.label];
    if (name.empty()) {
      name = std::filesystem::path(f.path).parent_path().filename().string();
    }
  }
  return names;
}

// The split of the checkpoint's data set named by --split.
absl::StatusOr<Split> LoadSplit(const TrainedModel& t,
                                const std::string& data_dir,
                                const std::string& split) {
  if (split != "test" && split != "train") {
    return absl::InvalidArgumentError(
        absl::StrCat("--split must be test or train, got \"", split, "\""));
  }
  ASSIGN_OR_RETURN(DataSplits splits,
                   LoadDataset(t.spec.data(), data_dir, t.spec.seed()));
  Split out;
  out.class_names = ClassNames(*splits.train);
  out.data = split == "test" ? std::move(splits.test) : std::move(splits.train);
  return out;
}

// `field` as one CSV field: quoted when it holds a comma, a quote or a line
// break (RFC 4180), its quotes doubled.
std::string CsvField(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  return absl::StrCat("\"", absl::StrReplaceAll(field, {{"\"", "\"\""}}), "\"");
}

// ",NAME" of class `c` when there are names, else nothing.
std::string NameColumn(const std::vector<std::string>& names, int64_t c) {
  if (names.empty()) return "";
  return absl::StrCat(",", c >= 0 && c < static_cast<int64_t>(names.size())
                               ? CsvField(names[c])
                               : "");
}

// "index,label[,label_name],class_1[,name_1],prob_1,...": each sample's
// top `k` classes with their softmax probabilities (and names).
std::string TopKRows(int64_t first, const Tensor& out, const Batch& b,
                     int64_t k, const std::vector<std::string>& names) {
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
    const int64_t label = b.labels.empty() ? -1 : b.labels[i];
    absl::StrAppend(&rows, first + i, ",", label, NameColumn(names, label));
    for (int64_t j = 0; j < top; ++j) {
      absl::StrAppend(&rows, ",", order[j], NameColumn(names, order[j]), ",",
                      absl::StrFormat("%.6g", p[order[j]] / sum));
    }
    rows += "\n";
  }
  return rows;
}

absl::Status PredictArray(TrainedModel& trained, const std::string& input,
                          const std::string& out, int64_t batch, int streams) {
  ASSIGN_OR_RETURN(std::unique_ptr<NpyArray> array, NpyArray::Open(input));
  ASSIGN_OR_RETURN(const std::vector<float> x,
                   Inputs(*array, trained.input_shape));
  const int64_t n = array->shape()[0];
  ASSIGN_OR_RETURN(const std::vector<float> y,
                   Predict(trained, x.data(), n, batch, streams));
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
absl::Status PredictSplit(TrainedModel& trained, const Split& split,
                          const std::string& out, int64_t batch,
                          int64_t top_k) {
  const Dataset& data = *split.data;
  const std::vector<std::string>& names = split.class_names;
  const bool npy = absl::EndsWith(out, ".npy");
  if (!npy && data.float_targets()) {
    return absl::InvalidArgumentError(
        "--out: a model with float targets writes raw outputs: name a .npy "
        "file");
  }
  std::string csv = names.empty() ? "index,label" : "index,label,label_name";
  for (int64_t j = 1; j <= top_k; ++j) {
    absl::StrAppend(&csv, ",class_", j,
                    names.empty() ? "" : absl::StrCat(",name_", j), ",prob_",
                    j);
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
          csv += TopKRows(first, outputs, b, top_k, names);
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

constexpr char kThreadsHelp[] =
    "compute threads (default: OMP_NUM_THREADS, else one per core)";

// The flags of `cohort predict`.
struct PredictFlags {
  std::string checkpoint, input, out, data_dir, split = "test";
  int64_t batch = 256, top_k = -1;  // -1: not given
  std::string prompt, temperature = "1", generate_flag;
  int64_t generate = 0, seed = 0, threads = 0;  // 0: not given
  int64_t streams = 0;                          // 0: one per thread
  bool skip_damaged = false;
};

void AddPredictFlags(FlagSet& flags, PredictFlags* f) {
  flags.String("checkpoint", &f->checkpoint,
               "a checkpoint file (ckpt-*.cohort), or a directory: its newest "
               "(DIR/best: the best of keep_best)",
               "PATH");
  flags.Bool("skip-damaged", &f->skip_damaged, kSkipDamagedHelp);
  flags.String("input", &f->input,
               ".npy file of inputs [N, *sample shape] (float32, float16, "
               "or uint8 divided by 255); without it, a split of the "
               "checkpoint's data set",
               "FILE");
  flags.String("data-dir", &f->data_dir,
               "the data set's directory (overrides the spec's)", "DIR");
  flags.String("split", &f->split, "the data split (without --input)",
               "test|train");
  flags.String("out", &f->out,
               absl::StrCat(".npy for raw outputs, or .csv for each sample's "
                            "top-k classes with probabilities; ",
                            kOutHelp),
               "FILE");
  flags.Int("batch", &f->batch, "samples per forward pass", 1, 1 << 20);
  flags.Int("threads", &f->threads, kThreadsHelp, 1, 1024);
  flags.Int("streams", &f->streams,
            "copies of the model that run an --input array's batches side "
            "by side, sharing the compute threads, at most one per thread "
            "(default: one per thread for batches under 8 samples, else 1; "
            "fewer where there are fewer batches or memory holds fewer "
            "copies)",
            1, 1024);
  flags.Int("top-k", &f->top_k,
            "classes per sample in a .csv (default 5); with --prompt, sample "
            "only among the K most likely tokens (default 0: all)",
            0, INT32_MAX);
  flags.String("prompt", &f->prompt,
               "text to continue: its bytes are the token ids (a TOKENS "
               "checkpoint in format BYTES); prints it and --generate bytes",
               "TEXT");
  // Parsed by ParseGenerateFlag, whose message tells an integer out of
  // range from one that is not an integer.
  flags.String("generate", &f->generate_flag,
               "with --prompt: N, the bytes to generate", "N");
  flags.String("temperature", &f->temperature,
               "with --prompt: softmax temperature (0: greedy)", "NUMBER");
  flags.Int("seed", &f->seed, "with --prompt: the sampler's seed");
}

// `cohort predict --prompt`: text generation (cli/generate.h).
absl::Status RunGenerate(const PredictFlags& f) {
  RETURN_IF_ERROR(Required(f.checkpoint, "checkpoint"));
  if (f.prompt.empty()) {
    return absl::InvalidArgumentError(
        "--generate needs --prompt: the text to continue");
  }
  if (f.streams != 0) {
    return absl::InvalidArgumentError(
        "--streams: text generation runs one copy of the model; only an "
        "--input array's batches run on several");
  }
  GenerateOptions o;
  o.tokens = f.generate;
  o.top_k = f.top_k < 0 ? 0 : f.top_k;
  o.seed = static_cast<uint64_t>(f.seed);
  if (!absl::SimpleAtod(f.temperature, &o.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--temperature must be a finite number >= 0 (0: greedy), got \"",
        f.temperature, "\""));
  }
  // Refuse bad options before the checkpoint is read.
  RETURN_IF_ERROR(CheckGenerateOptions(o, INT32_MAX));
  ASSIGN_OR_RETURN(TrainedModel trained,
                   LoadModel(f.checkpoint, f.skip_damaged, "predict"));
  return GenerateText(trained, f.prompt, o);
}

// The checks on predict's flags that need no file.
absl::Status CheckPredictFlags(PredictFlags& f) {
  if (f.top_k < 0) f.top_k = 5;
  if (f.top_k < 1 || f.top_k > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--top-k must be an integer in [1, 1000] for a .csv, got ", f.top_k));
  }
  RETURN_IF_ERROR(Required(f.checkpoint, "checkpoint"));
  RETURN_IF_ERROR(Required(f.out, "out"));
  if (!absl::EndsWith(f.out, ".npy") && !absl::EndsWith(f.out, ".csv")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out must end in .npy (raw outputs) or .csv (top-k classes), got ",
        f.out));
  }
  if (!f.input.empty() && absl::EndsWith(f.out, ".csv")) {
    return absl::InvalidArgumentError(
        "--out: predictions on an --input array are written as .npy");
  }
  if (f.input.empty() && f.streams > 1) {
    return absl::InvalidArgumentError(
        "--streams: only an --input array's batches run on several copies "
        "of the model; a data set split runs on one");
  }
  return absl::OkStatus();
}

// The "true\predicted" CSV of a k x k confusion matrix.
std::string ConfusionCsv(const std::vector<int64_t>& confusion, int64_t k) {
  std::string csv = "true\\predicted";
  for (int64_t j = 0; j < k; ++j) absl::StrAppend(&csv, ",", j);
  csv += "\n";
  for (int64_t i = 0; i < k; ++i) {
    absl::StrAppend(&csv, i);
    for (int64_t j = 0; j < k; ++j) {
      absl::StrAppend(&csv, ",", confusion[i * k + j]);
    }
    csv += "\n";
  }
  return csv;
}

}  // namespace

absl::Status RunPredict(const std::vector<std::string>& args, bool* help) {
  PredictFlags f;
  FlagSet flags("predict");
  AddPredictFlags(flags, &f);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (!f.generate_flag.empty()) {
    ASSIGN_OR_RETURN(f.generate, ParseGenerateFlag(f.generate_flag));
  }
  if (f.threads > 0) SetComputeThreads(static_cast<int>(f.threads));
  if (!f.prompt.empty() || f.generate != 0) return RunGenerate(f);
  RETURN_IF_ERROR(CheckPredictFlags(f));
  CommandInputs inputs;
  inputs.AddCheckpoint(f.checkpoint);
  if (!f.input.empty()) inputs.files.emplace_back("the --input file", f.input);
  RETURN_IF_ERROR(CheckOutputFlag("--out", f.out, inputs));
  ASSIGN_OR_RETURN(TrainedModel trained,
                   LoadModel(f.checkpoint, f.skip_damaged, "predict"));
  if (!f.input.empty()) {
    return PredictArray(trained, f.input, f.out, f.batch,
                        static_cast<int>(f.streams));
  }
  // The data set is known once the checkpoint's spec is.
  inputs.AddDataSet(trained.spec.data(), f.data_dir);
  RETURN_IF_ERROR(CheckOutputFlag("--out", f.out, inputs));
  ASSIGN_OR_RETURN(const Split data, LoadSplit(trained, f.data_dir, f.split));
  return PredictSplit(trained, data, f.out, f.batch, f.top_k);
}

absl::Status RunEvaluate(const std::vector<std::string>& args, bool* help) {
  std::string checkpoint, data_dir, split = "test", confusion;
  int64_t batch = 256, threads = 0;
  bool skip_damaged = false;
  FlagSet flags("evaluate");
  flags.String("checkpoint", &checkpoint,
               "a checkpoint file (ckpt-*.cohort), or a directory: its newest "
               "(DIR/best: the best of keep_best)",
               "PATH");
  flags.Bool("skip-damaged", &skip_damaged, kSkipDamagedHelp);
  flags.String("data-dir", &data_dir,
               "the data set's directory (overrides the spec's)", "DIR");
  flags.String("split", &split, "the data split", "test|train");
  flags.String("confusion", &confusion,
               absl::StrCat("write the confusion matrix (rows: true class, "
                            "columns: predicted) to this CSV file, up to 100 "
                            "classes; ",
                            kOutHelp),
               "FILE");
  flags.Int("batch", &batch, "samples per forward pass", 1, 1 << 20);
  flags.Int("threads", &threads, kThreadsHelp, 1, 1024);
  RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    *help = true;
    return absl::OkStatus();
  }
  if (threads > 0) SetComputeThreads(static_cast<int>(threads));
  RETURN_IF_ERROR(Required(checkpoint, "checkpoint"));
  CommandInputs inputs;
  inputs.AddCheckpoint(checkpoint);
  if (!confusion.empty()) {
    RETURN_IF_ERROR(CheckOutputFlag("--confusion", confusion, inputs));
  }
  ASSIGN_OR_RETURN(TrainedModel trained,
                   LoadModel(checkpoint, skip_damaged, "evaluate"));
  if (!confusion.empty()) {
    inputs.AddDataSet(trained.spec.data(), data_dir);
    RETURN_IF_ERROR(CheckOutputFlag("--confusion", confusion, inputs));
  }
  ASSIGN_OR_RETURN(const Split loaded, LoadSplit(trained, data_dir, split));
  const std::unique_ptr<Dataset>& data = loaded.data;
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
  RETURN_IF_ERROR(WriteFileAtomically(confusion, ConfusionCsv(e.confusion, k)));
  std::printf("wrote %s: the %lldx%lld confusion matrix\n", confusion.c_str(),
              static_cast<long long>(k), static_cast<long long>(k));
  return absl::OkStatus();
}

}  // namespace cohort
