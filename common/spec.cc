#include "common/spec.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/layer_spec_check.h"
#include "common/logging.h"
#include "common/memory_estimate.h"
#include "common/model_sizes.h"
#include "common/spec_onnx.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"
#include "common/tensor_names.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/text_format.h"

namespace cohort {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::TextFormat;
using Tree = TextFormat::ParseInfoTree;
using Loc = TextFormat::ParseLocation;
using spec_internal::CheckData;
using spec_internal::CheckLayerSpec;
using spec_internal::NonNegative;
using spec_internal::OnlyFor;
using spec_internal::Positive;
using spec_internal::Prefix;
using spec_internal::ReadOnnxModel;
using spec_internal::Require;
using spec_internal::Scope;
using spec_internal::UnitInterval;
using spec_internal::WithFieldSuggestion;

// Column of byte `b` of `line` as protobuf counts columns (0-based, a tab
// advances to the next multiple of 8), so ours match the parser's.
int ColumnOf(absl::string_view line, size_t b) {
  int c = 0;
  for (size_t i = 0; i < b && i < line.size(); ++i) {
    c = line[i] == '\t' ? (c / 8 + 1) * 8 : c + 1;
  }
  return c;
}

// The parser reports an unknown or repeated name at the token after it;
// move the column back to the name (one of the quoted words of `message`)
// when it is what precedes, since that is what the user has to fix.
int BackUpToName(absl::string_view text, int line, int column,
                 absl::string_view message) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (line < 0 || line >= static_cast<int>(lines.size())) return column;
  absl::string_view l = lines[line];
  size_t b = 0;
  while (b < l.size() && ColumnOf(l, b) < column) ++b;
  absl::string_view before = absl::StripTrailingAsciiWhitespace(l.substr(0, b));
  std::vector<absl::string_view> parts = absl::StrSplit(message, '"');
  for (size_t i = 1; i < parts.size(); i += 2) {
    if (!parts[i].empty() && absl::EndsWith(before, parts[i])) {
      return ColumnOf(l, before.size() - parts[i].size());
    }
  }
  return column;
}

// Keeps the parser's first error (later ones are usually consequences).
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  FirstErrorCollector(absl::string_view text, const std::string& file)
      : text_(text), file_(file) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!error_.empty()) return;
    column = BackUpToName(text_, line, column, message);
    error_ = Prefix(file_, Loc(line, column)) + WithFieldSuggestion(message);
  }
  const std::string& error() const { return error_; }

 private:
  absl::string_view text_;
  const std::string& file_;
  std::string error_;
};

// Every float finite and every enum value known, anywhere in the message
// (text format accepts "inf", "nan" and, for open enums, bare numbers).
absl::Status CheckScalars(const Message& m, const Scope& s) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* fd : fields) {
    int n = fd->is_repeated() ? r->FieldSize(m, fd) : 1;
    for (int i = 0; i < n; ++i) {
      int index = fd->is_repeated() ? i : -1;
      if (fd->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& sub = fd->is_repeated() ? r->GetRepeatedMessage(m, fd, i)
                                               : r->GetMessage(m, fd);
        RETURN_IF_ERROR(CheckScalars(sub, s.Nested(fd, index)));
      } else if (fd->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT &&
                 !fd->is_repeated() && !std::isfinite(r->GetFloat(m, fd))) {
        return s.Error(
            fd, index,
            absl::StrCat("must be finite, got ", r->GetFloat(m, fd)));
      } else if (fd->cpp_type() == FieldDescriptor::CPPTYPE_ENUM &&
                 !fd->is_repeated()) {
        int v = r->GetEnumValue(m, fd);
        if (fd->enum_type()->FindValueByNumber(v) == nullptr) {
          std::vector<std::string> names;
          for (int k = 0; k < fd->enum_type()->value_count(); ++k) {
            names.push_back(fd->enum_type()->value(k)->name());
          }
          return s.Error(fd, index,
                         absl::StrCat("must be one of ",
                                      absl::StrJoin(names, ", "), ", got ", v));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const ModelSpec& m, const Scope& s) {
  if (!m.zoo().empty() && (m.layers_size() > 0 || !m.onnx().empty())) {
    return s.Error(
        m, "zoo", -1,
        absl::StrCat("must be empty when layers or onnx are given, got \"",
                     m.zoo(), "\""));
  }
  if (m.zoo().empty() && m.layers_size() == 0) {
    return s.Error(m, "zoo", -1,
                   "or model.layers or model.onnx must be given, got none");
  }
  for (int i = 0; i < m.layers_size(); ++i) {
    RETURN_IF_ERROR(CheckLayerSpec(m.layers(i), s, m, i));
  }
  const std::string twice = DuplicateLayerName(m.layers());
  if (!twice.empty()) {
    return s.Error(m, "layers", -1,
                   absl::StrCat("name \"", twice,
                                "\" is given to two layers; each layer's "
                                "tensors need their own names"));
  }
  return absl::OkStatus();
}

absl::Status CheckOptimizer(const OptimizerSpec& o, const Scope& s) {
  RETURN_IF_ERROR(Positive(s, o, "lr", o.lr()));
  RETURN_IF_ERROR(UnitInterval(s, o, "momentum", o.momentum()));
  RETURN_IF_ERROR(NonNegative(s, o, "weight_decay", o.weight_decay()));
  if (o.nesterov() && o.momentum() <= 0) {
    return s.Error(o, "nesterov", -1, "needs momentum > 0, got momentum 0");
  }
  RETURN_IF_ERROR(UnitInterval(s, o, "beta1", o.beta1()));
  RETURN_IF_ERROR(UnitInterval(s, o, "beta2", o.beta2()));
  RETURN_IF_ERROR(NonNegative(s, o, "eps", o.eps()));
  RETURN_IF_ERROR(NonNegative(s, o, "clip_grad_norm", o.clip_grad_norm()));
  RETURN_IF_ERROR(NonNegative(s, o, "clip_grad_value", o.clip_grad_value()));
  RETURN_IF_ERROR(NonNegative(s, o, "lr_decay", o.lr_decay()));
  RETURN_IF_ERROR(NonNegative(s, o, "initial_accumulator_value",
                              o.initial_accumulator_value()));
  RETURN_IF_ERROR(UnitInterval(s, o, "alpha", o.alpha()));
  RETURN_IF_ERROR(
      NonNegative(s, o, "trust_coefficient", o.trust_coefficient()));
  if (o.no_decay_bias_and_norm() && o.weight_decay() == 0) {
    return s.Error(o, "no_decay_bias_and_norm", -1,
                   "needs weight_decay > 0, got weight_decay 0");
  }
  // Settings the chosen kind would silently ignore are almost always a
  // mistake (an SGD spec edited into Adam), so they are rejected.
  const OptimizerSpec::Kind k = o.kind();
  const bool sgd = k == OptimizerSpec::SGD;
  const bool rmsprop = k == OptimizerSpec::RMSPROP;
  const bool lars = k == OptimizerSpec::LARS;
  const bool adagrad = k == OptimizerSpec::ADAGRAD;
  const bool adam_like = k == OptimizerSpec::ADAM ||
                         k == OptimizerSpec::ADAMW || k == OptimizerSpec::LAMB;
  std::string kind = OptimizerSpec::Kind_Name(k);
  RETURN_IF_ERROR(OnlyFor(sgd || rmsprop || lars, o.momentum() != 0, s, o,
                          "momentum", "SGD, RMSPROP and LARS", kind));
  RETURN_IF_ERROR(OnlyFor(sgd, o.nesterov(), s, o, "nesterov", "SGD", kind));
  const char* adam = "ADAM, ADAMW and LAMB";
  RETURN_IF_ERROR(
      OnlyFor(adam_like, o.beta1() != 0, s, o, "beta1", adam, kind));
  RETURN_IF_ERROR(
      OnlyFor(adam_like, o.beta2() != 0, s, o, "beta2", adam, kind));
  RETURN_IF_ERROR(OnlyFor(adam_like || rmsprop || adagrad, o.eps() != 0, s, o,
                          "eps", "ADAM, ADAMW, LAMB, RMSPROP and ADAGRAD",
                          kind));
  RETURN_IF_ERROR(
      OnlyFor(adagrad, o.lr_decay() != 0, s, o, "lr_decay", "ADAGRAD", kind));
  RETURN_IF_ERROR(OnlyFor(adagrad, o.initial_accumulator_value() != 0, s, o,
                          "initial_accumulator_value", "ADAGRAD", kind));
  RETURN_IF_ERROR(
      OnlyFor(rmsprop, o.alpha() != 0, s, o, "alpha", "RMSPROP", kind));
  RETURN_IF_ERROR(
      OnlyFor(rmsprop, o.centered(), s, o, "centered", "RMSPROP", kind));
  return OnlyFor(lars, o.trust_coefficient() != 0, s, o, "trust_coefficient",
                 "LARS", kind);
}

// MULTI_STEP's milestones: positive and increasing, each error at its own
// line.
absl::Status CheckMilestones(const LrSchedule& l, const Scope& s) {
  for (int i = 0; i < l.milestones_size(); ++i) {
    const int64_t m = l.milestones(i);
    const int64_t before = i > 0 ? l.milestones(i - 1) : 0;
    if (m <= before) {
      return s.Error(l, "milestones", i,
                     absl::StrCat("must be > ", i > 0 ? "the one before (" : "",
                                  before, i > 0 ? ")" : "", ", got ", m));
    }
  }
  if (l.milestones_size() == 0) {
    return s.Error(l, "milestones", -1, "must list at least one step");
  }
  return absl::OkStatus();
}

// The fields of ONE_CYCLE and POLYNOMIAL (0: the default).
absl::Status CheckCycle(const LrSchedule& l, const Scope& s) {
  RETURN_IF_ERROR(Require(l.pct_start() >= 0 && l.pct_start() < 1, s, l,
                          "pct_start", "in (0, 1)", l.pct_start()));
  RETURN_IF_ERROR(Require(l.div_factor() == 0 || l.div_factor() >= 1, s, l,
                          "div_factor", ">= 1", l.div_factor()));
  RETURN_IF_ERROR(
      Require(l.final_div_factor() == 0 || l.final_div_factor() >= 1, s, l,
              "final_div_factor", ">= 1", l.final_div_factor()));
  return NonNegative(s, l, "power", l.power());
}

absl::Status CheckSchedule(const LrSchedule& l, float lr, const Scope& s) {
  RETURN_IF_ERROR(NonNegative(s, l, "warmup_steps", l.warmup_steps()));
  RETURN_IF_ERROR(NonNegative(s, l, "min_lr", l.min_lr()));
  std::string kind = LrSchedule::Kind_Name(l.kind());
  const LrSchedule::Kind k = l.kind();
  const bool step = k == LrSchedule::STEP;
  const bool multi = k == LrSchedule::MULTI_STEP;
  const bool expo = k == LrSchedule::EXPONENTIAL;
  const bool cycle = k == LrSchedule::ONE_CYCLE;
  const bool poly = k == LrSchedule::POLYNOMIAL;
  const bool gamma = step || multi || expo;
  RETURN_IF_ERROR(
      OnlyFor(step, l.step_size() != 0, s, l, "step_size", "STEP", kind));
  RETURN_IF_ERROR(OnlyFor(gamma, l.gamma() != 0, s, l, "gamma",
                          "STEP, MULTI_STEP and EXPONENTIAL", kind));
  RETURN_IF_ERROR(OnlyFor(k == LrSchedule::COSINE, l.min_lr() != 0, s, l,
                          "min_lr", "COSINE", kind));
  RETURN_IF_ERROR(OnlyFor(multi, l.milestones_size() > 0, s, l, "milestones",
                          "MULTI_STEP", kind));
  for (const char* f : {"pct_start", "div_factor", "final_div_factor"}) {
    const auto* fd = l.GetDescriptor()->FindFieldByName(f);
    RETURN_IF_ERROR(OnlyFor(cycle, l.GetReflection()->GetFloat(l, fd) != 0, s,
                            l, f, "ONE_CYCLE", kind));
  }
  RETURN_IF_ERROR(
      OnlyFor(poly, l.power() != 0, s, l, "power", "POLYNOMIAL", kind));
  if (step) RETURN_IF_ERROR(Positive(s, l, "step_size", l.step_size()));
  if (gamma) {
    RETURN_IF_ERROR(Require(l.gamma() > 0 && l.gamma() <= 1, s, l, "gamma",
                            "in (0, 1]", l.gamma()));
  }
  if (multi) RETURN_IF_ERROR(CheckMilestones(l, s));
  if (cycle || poly) RETURN_IF_ERROR(CheckCycle(l, s));
  return Require(l.min_lr() <= lr, s, l, "min_lr",
                 absl::StrCat("<= optimizer.lr (", lr, ")"), l.min_lr());
}

absl::Status CheckStopping(const JobSpec& j, const Scope& s) {
  RETURN_IF_ERROR(NonNegative(s, j, "epochs", j.epochs()));
  RETURN_IF_ERROR(NonNegative(s, j, "max_steps", j.max_steps()));
  if (j.epochs() > 0 || j.max_steps() > 0) return absl::OkStatus();
  if (s.Written(j, "epochs") || !s.Written(j, "max_steps")) {
    return s.Error(j, "epochs", -1, "must be > 0 when max_steps is 0, got 0");
  }
  return s.Error(j, "max_steps", -1, "must be > 0 when epochs is 0, got 0");
}

absl::Status CheckCluster(const ClusterSpec& c, const Scope& s) {
  RETURN_IF_ERROR(NonNegative(s, c, "min_workers", c.min_workers()));
  RETURN_IF_ERROR(Require(
      c.max_workers() == 0 || c.max_workers() >= std::max(1, c.min_workers()),
      s, c, "max_workers", ">= min_workers", c.max_workers()));
  RETURN_IF_ERROR(Require(c.max_workers() <= 4096, s, c, "max_workers",
                          "<= 4096", c.max_workers()));
  for (const char* f :
       {"last_call_ms", "join_timeout_ms", "heartbeat_interval_ms",
        "heartbeat_misses", "bucket_bytes", "collective_timeout_ms"}) {
    const auto* fd = c.GetDescriptor()->FindFieldByName(f);
    const int64_t v =
        fd->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT32
            ? c.GetReflection()->GetInt32(c, fd)
            : c.GetReflection()->GetInt64(c, fd);
    RETURN_IF_ERROR(NonNegative(s, c, f, v));
  }
  RETURN_IF_ERROR(Require(c.max_restarts() >= 0 && c.max_restarts() <= 10000, s,
                          c, "max_restarts", "in [0, 10000]",
                          c.max_restarts()));
  const std::string& a = c.allreduce_algorithm();
  RETURN_IF_ERROR(Require(a.empty() || a == "ring" || a == "ring_chunked" ||
                              a == "halving_doubling" || a == "bcube",
                          s, c, "allreduce_algorithm",
                          "one of ring, ring_chunked, halving_doubling, bcube",
                          absl::StrCat("\"", a, "\"")));
  const std::string& n = c.nccl_algorithm();
  RETURN_IF_ERROR(Require(n.empty() || n == "flat" || n == "hierarchical", s, c,
                          "nccl_algorithm", "flat or hierarchical",
                          absl::StrCat("\"", n, "\"")));
  return absl::OkStatus();
}

absl::Status CheckPs(const PsSpec& p, const Scope& s) {
  RETURN_IF_ERROR(NonNegative(s, p, "shards", p.shards()));
  RETURN_IF_ERROR(
      Require(p.shards() <= 1024, s, p, "shards", "<= 1024", p.shards()));
  RETURN_IF_ERROR(NonNegative(s, p, "staleness", p.staleness()));
  RETURN_IF_ERROR(Require(p.consistency() == SSP || p.staleness() == 0, s, p,
                          "staleness", "0 unless consistency is SSP",
                          p.staleness()));
  RETURN_IF_ERROR(NonNegative(s, p, "partition_bytes", p.partition_bytes()));
  RETURN_IF_ERROR(Require(
      p.partition_bytes() == 0 || (p.partition_bytes() >= 4 &&
                                   p.partition_bytes() <= (int64_t{1} << 30)),
      s, p, "partition_bytes", "in [4, 1 GiB]", p.partition_bytes()));
  return NonNegative(s, p, "rpc_timeout_ms", p.rpc_timeout_ms());
}

// Protobuf's own test, the one its serializer applies.
bool ValidUtf8(const std::string& text) {
  return google::protobuf::internal::IsStructurallyValidUTF8(
      text.data(), static_cast<int>(text.size()));
}

// Protobuf refuses to serialize string fields that are not UTF-8, so a spec
// holding one could never reach a worker or the coordinator's state file
// (found by fuzz/spec_fuzzer.cc): refuse it here, naming the field.
absl::Status CheckUtf8(const Message& m, const Scope& s) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* fd : fields) {
    const int n = fd->is_repeated() ? r->FieldSize(m, fd) : 1;
    for (int i = 0; i < n; ++i) {
      const int index = fd->is_repeated() ? i : -1;
      if (fd->type() == FieldDescriptor::TYPE_STRING) {
        const std::string v = fd->is_repeated() ? r->GetRepeatedString(m, fd, i)
                                                : r->GetString(m, fd);
        if (!ValidUtf8(v)) {
          return s.Error(fd, index, "is not valid UTF-8 text");
        }
      } else if (fd->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& child = fd->is_repeated()
                                   ? r->GetRepeatedMessage(m, fd, i)
                                   : r->GetMessage(m, fd);
        RETURN_IF_ERROR(CheckUtf8(child, s.Nested(fd, index)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCheckpoint(const CheckpointSpec& c, const Scope& s) {
  RETURN_IF_ERROR(NonNegative(s, c, "every_steps", c.every_steps()));
  RETURN_IF_ERROR(Require(c.every_seconds() >= 0 && c.every_seconds() < 1e9, s,
                          c, "every_seconds", "in [0, 1e9)",
                          c.every_seconds()));
  // A dir alone keeps only the final checkpoint.
  return NonNegative(s, c, "keep", c.keep());
}

// loss_weights and ignore_index: CROSS_ENTROPY only. The weights' count is
// checked against the model's outputs where the model is built
// (worker/objective.h), since only the shape inference knows it.
absl::Status CheckClassWeighting(const JobSpec& j, const Scope& s,
                                 LossKind kind, const std::string& loss) {
  const bool ce = kind == CROSS_ENTROPY;
  RETURN_IF_ERROR(OnlyFor(ce, j.loss_weights_size() > 0, s, j, "loss_weights",
                          "CROSS_ENTROPY", loss));
  RETURN_IF_ERROR(OnlyFor(ce, j.has_ignore_index(), s, j, "ignore_index",
                          "CROSS_ENTROPY", loss));
  double total = 0;
  for (int i = 0; i < j.loss_weights_size(); ++i) {
    const float w = j.loss_weights(i);
    if (!(w >= 0) || std::isinf(w)) {
      return s.Error(j, "loss_weights", i,
                     absl::StrCat("must be finite and >= 0, got ", w));
    }
    total += w;
  }
  if (j.loss_weights_size() > 0 && total == 0) {
    return s.Error(j, "loss_weights", -1, "must not all be 0");
  }
  // PyTorch weights the smoothing term by every class's weight; that form
  // is not implemented, so the pair is refused rather than approximated.
  if (j.loss_weights_size() > 0 && j.label_smoothing() != 0) {
    return s.Error(j, "loss_weights", -1,
                   "cannot be combined with label_smoothing");
  }
  return Require(!j.has_ignore_index() || j.ignore_index() >= 0, s, j,
                 "ignore_index", ">= 0 (a class id)", j.ignore_index());
}

// The loss against the data's targets, and the settings only one loss
// reads.
absl::Status CheckLoss(const JobSpec& j, const Scope& s) {
  const bool floats = HasFloatTargets(j.data());
  // Unset: the default FillJobDefaults will choose.
  const LossKind kind =
      j.has_loss() ? j.loss() : (floats ? MSE : CROSS_ENTROPY);
  const std::string loss = LossKind_Name(kind);
  if (j.data().kind() == DatasetSpec::TOKENS && kind != CROSS_ENTROPY) {
    return s.Error(j, "loss", -1,
                   absl::StrCat("must be CROSS_ENTROPY for TOKENS data "
                                "(next-token prediction), got ",
                                loss));
  }
  if (kind == CROSS_ENTROPY && floats) {
    return s.Error(j, "loss", -1,
                   "CROSS_ENTROPY needs class labels, but the data has float "
                   "targets: use MSE, L1, HUBER or BCE_WITH_LOGITS");
  }
  RETURN_IF_ERROR(OnlyFor(kind == CROSS_ENTROPY, j.label_smoothing() != 0, s, j,
                          "label_smoothing", "CROSS_ENTROPY", loss));
  RETURN_IF_ERROR(Require(j.label_smoothing() >= 0 && j.label_smoothing() < 1,
                          s, j, "label_smoothing", "in [0, 1)",
                          j.label_smoothing()));
  RETURN_IF_ERROR(OnlyFor(kind == HUBER, j.huber_delta() != 0, s, j,
                          "huber_delta", "HUBER", loss));
  RETURN_IF_ERROR(NonNegative(s, j, "huber_delta", j.huber_delta()));
  return CheckClassWeighting(j, s, kind, loss);
}

// Float target elements per sample: the NumPy target's shape, one for the
// other kinds with float targets (a single column or label).
int64_t FloatTargetElements(const DatasetSpec& d) {
  int64_t n = 1;
  if (d.kind() == DatasetSpec::NUMPY) {
    for (int64_t k : d.numpy().target_shape()) n *= k;
  }
  return n;
}

// The metrics the job's evaluation gives (worker/objective.h).
std::vector<std::string> EvalMetrics(const JobSpec& j) {
  const bool floats = HasFloatTargets(j.data());
  const LossKind kind =
      j.has_loss() ? j.loss() : (floats ? MSE : CROSS_ENTROPY);
  std::vector<std::string> given = {"loss"};
  if (j.data().kind() == DatasetSpec::TOKENS) {
    given.insert(given.end(), {"accuracy", "perplexity"});
  } else if (!floats) {
    given.insert(given.end(), {"accuracy", "top5_accuracy"});
  } else if (kind == BCE_WITH_LOGITS) {
    given.push_back("accuracy");
    // A click-through-rate model: one logit per sample.
    if (FloatTargetElements(j.data()) == 1) {
      given.insert(given.end(), {"auc", "normalized_entropy"});
    }
  } else {
    given.insert(given.end(), {"mse", "mae", "r2"});
  }
  return given;
}

absl::Status CheckEvalMetric(const EvalSpec& e, const JobSpec& j,
                             const Scope& es) {
  const std::vector<std::string> given = EvalMetrics(j);
  if (e.metric().empty() ||
      std::find(given.begin(), given.end(), e.metric()) != given.end()) {
    return absl::OkStatus();
  }
  const bool binary = e.metric() == "auc" || e.metric() == "normalized_entropy";
  return es.Error(
      e, "metric", -1,
      absl::StrCat("\"", e.metric(),
                   "\" is not a metric this job's evaluation gives: one of ",
                   absl::StrJoin(given, ", "),
                   binary ? " (auc and normalized_entropy need loss "
                            "BCE_WITH_LOGITS and one float target per sample)"
                          : ""));
}

// Validation-driven control: the metric must be one the job's evaluation
// gives (worker/objective.h), and early stopping and the best checkpoint
// need evaluation, and all-reduce mode (PS state lives on the shards, and
// SSP/ASYNC workers evaluate apart).
absl::Status CheckControl(const JobSpec& j, const Scope& s) {
  const EvalSpec& e = j.eval();
  const Scope es = s.Nested(j, "eval", -1);
  const Scope cs = s.Nested(j, "checkpoint", -1);
  RETURN_IF_ERROR(CheckEvalMetric(e, j, es));
  RETURN_IF_ERROR(NonNegative(es, e, "early_stopping_patience",
                              e.early_stopping_patience()));
  RETURN_IF_ERROR(Require(e.min_delta() >= 0 && std::isfinite(e.min_delta()),
                          es, e, "min_delta", "finite and >= 0",
                          e.min_delta()));
  struct Use {
    const Scope& scope;
    const Message& m;
    const char* field;
    bool set;
  };
  for (const Use& u :
       {Use{es, e, "early_stopping_patience", e.early_stopping_patience() > 0},
        Use{cs, j.checkpoint(), "keep_best", j.checkpoint().keep_best()}}) {
    if (!u.set) continue;
    if (e.disable()) {
      return u.scope.Error(u.m, u.field, -1,
                           "needs evaluation, but eval.disable is set");
    }
    if (j.mode() == PS) {
      return u.scope.Error(u.m, u.field, -1,
                           "needs all-reduce mode (in PS mode the state lives "
                           "on the shards and workers may evaluate apart)");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckJob(const JobSpec& j, const Scope& s) {
  RETURN_IF_ERROR(CheckScalars(j, s));
  RETURN_IF_ERROR(Positive(s, j, "batch_size", j.batch_size()));
  RETURN_IF_ERROR(NonNegative(s, j, "gradient_accumulation_steps",
                              j.gradient_accumulation_steps()));
  // A step's samples (batch x steps x replicas) must stay far inside int64
  // and an epoch must hold whole steps of realistic size.
  RETURN_IF_ERROR(Require(j.gradient_accumulation_steps() <= 65536, s, j,
                          "gradient_accumulation_steps", "<= 65536",
                          j.gradient_accumulation_steps()));
  RETURN_IF_ERROR(CheckStopping(j, s));
  RETURN_IF_ERROR(CheckModel(j.model(), s.Nested(j, "model", -1)));
  RETURN_IF_ERROR(CheckData(j.data(), s.Nested(j, "data", -1)));
  RETURN_IF_ERROR(CheckLoss(j, s));
  RETURN_IF_ERROR(CheckOptimizer(j.optimizer(), s.Nested(j, "optimizer", -1)));
  if (j.mode() == PS) {
    // Shards apply each push as it comes: there is no averaged gradient of
    // the job to clip.
    const Scope o = s.Nested(j, "optimizer", -1);
    for (const char* f : {"clip_grad_norm", "clip_grad_value"}) {
      const auto* fd = j.optimizer().GetDescriptor()->FindFieldByName(f);
      if (j.optimizer().GetReflection()->GetFloat(j.optimizer(), fd) != 0) {
        return o.Error(j.optimizer(), f, -1,
                       "needs all-reduce mode (in PS mode the shards apply "
                       "each worker's push as it comes)");
      }
    }
    // A shard holds pieces of tensors (common/partition.h cuts large ones),
    // so it cannot take a tensor's whole norm.
    const OptimizerSpec::Kind k = j.optimizer().kind();
    if (k == OptimizerSpec::LAMB || k == OptimizerSpec::LARS) {
      return o.Error(j.optimizer(), "kind", -1,
                     absl::StrCat(OptimizerSpec::Kind_Name(k),
                                  " needs all-reduce mode (its trust ratio "
                                  "takes norms over whole tensors, which PS "
                                  "shards hold only pieces of)"));
    }
  }
  RETURN_IF_ERROR(CheckSchedule(j.lr_schedule(), j.optimizer().lr(),
                                s.Nested(j, "lr_schedule", -1)));
  RETURN_IF_ERROR(CheckCluster(j.cluster(), s.Nested(j, "cluster", -1)));
  RETURN_IF_ERROR(CheckPs(j.ps(), s.Nested(j, "ps", -1)));
  RETURN_IF_ERROR(CheckCompression(j, s));
  RETURN_IF_ERROR(
      CheckCheckpoint(j.checkpoint(), s.Nested(j, "checkpoint", -1)));
  Scope e = s.Nested(j, "eval", -1);
  RETURN_IF_ERROR(
      NonNegative(e, j.eval(), "every_steps", j.eval().every_steps()));
  RETURN_IF_ERROR(
      NonNegative(e, j.eval(), "batch_size", j.eval().batch_size()));
  RETURN_IF_ERROR(NonNegative(s.Nested(j, "log", -1), j.log(), "every_steps",
                              j.log().every_steps()));
  return CheckControl(j, s);
}

// Where a size error of `spec`'s model points: the layer (or the zoo name)
// that failed, else what gave the input (the zoo name, the synthetic
// shape, or the data kind).
std::string SizeErrorAt(const JobSpec& j, const Scope& s, int failed_layer) {
  const Scope model = s.Nested(j, "model", -1);
  if (!j.model().zoo().empty()) return model.At(j.model(), "zoo", -1);
  if (failed_layer >= 0) return model.At(j.model(), "layers", failed_layer);
  const Scope data = s.Nested(j, "data", -1);
  if (j.data().kind() != DatasetSpec::SYNTHETIC) {
    return data.At(j.data(), "kind", -1);
  }
  return data.Nested(j.data(), "synthetic", -1)
      .At(j.data().synthetic(), "shape", 0);
}

// Every size the job will have, in checked arithmetic, before anything is
// allocated (common/model_sizes.h, common/memory_estimate.h): a layer
// whose input does not fit it, an unknown zoo model, or parameters,
// activations or data whose bytes pass 2^63 are refused here, in every
// process that reads a spec. Whether they fit a machine is for the
// processes that will hold them to say.
absl::Status CheckSizes(const JobSpec& j, const Scope& s) {
  int failed_layer = -1;
  absl::StatusOr<ModelSizes> sizes = InferJobModelSizes(j, &failed_layer);
  if (!sizes.ok()) {
    // Without a failed layer, the input is at fault: name where it is set.
    const bool input = failed_layer < 0 && j.model().zoo().empty() &&
                       j.data().kind() == DatasetSpec::SYNTHETIC;
    return absl::InvalidArgumentError(absl::StrCat(
        SizeErrorAt(j, s, failed_layer), input ? "data.synthetic.shape: " : "",
        sizes.status().message()));
  }
  RETURN_IF_ERROR(CheckTokenModel(j, s));
  RETURN_IF_ERROR(CheckTableModel(j, s));
  RETURN_IF_ERROR(CheckSparseTables(j, s));
  const absl::Status fits =
      CheckNoOverflow(EstimateWorkerMemory(j, *sizes, WorkerMemoryOptions()));
  if (fits.ok()) return fits;
  return absl::InvalidArgumentError(
      absl::StrCat(s.At(j, "model", -1), fits.message()));
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view text,
                                     const std::string& filename) {
  FirstErrorCollector errors(text, filename);
  Tree tree;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  JobSpec spec;
  if (!parser.ParseFromString(std::string(text), &spec)) {
    return absl::InvalidArgumentError(
        errors.error().empty() ? filename + ": cannot parse the job spec"
                               : errors.error());
  }
  RETURN_IF_ERROR(CheckUtf8(spec, Scope(&filename, &tree, "", Loc())));
  RETURN_IF_ERROR(
      ReadOnnxModel(&spec, filename, Scope(&filename, &tree, "", Loc())));
  RETURN_IF_ERROR(CheckJob(spec, Scope(&filename, &tree, "", Loc())));
  FillJobDefaults(&spec);
  RETURN_IF_ERROR(CheckSizes(spec, Scope(&filename, &tree, "", Loc())));
  return spec;
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadRegularFile(path, kMaxJobSpecBytes, "job spec"));
  return ParseJobSpec(text, path);
}

}  // namespace cohort
