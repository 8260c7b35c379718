// A spec in one line for logs, and the hash of what decides its training
// (spec.h).
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/residual_branch.h"
#include "common/spec.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace cohort {
namespace {

std::string DescribeModel(const ModelSpec& m) {
  if (!m.zoo().empty()) return m.zoo();
  return absl::StrCat(m.layers_size(), " layers");
}

std::string DescribeData(const DatasetSpec& d) {
  std::string s = DatasetSpec::Kind_Name(d.kind());
  if (d.kind() == DatasetSpec::SYNTHETIC) {
    absl::StrAppend(&s, " [", absl::StrJoin(d.synthetic().shape(), ", "), "] x",
                    d.synthetic().classes(), " classes");
  } else if (!d.dir().empty()) {
    absl::StrAppend(&s, " (", d.dir(), ")");
  }
  if (d.train_limit() > 0) absl::StrAppend(&s, " first ", d.train_limit());
  return s;
}

std::string DescribeOptimizer(const OptimizerSpec& o, const LrSchedule& l) {
  std::string s =
      absl::StrCat(OptimizerSpec::Kind_Name(o.kind()), " lr ", o.lr());
  if (o.momentum() != 0) absl::StrAppend(&s, " momentum ", o.momentum());
  if (o.nesterov()) absl::StrAppend(&s, " nesterov");
  if (o.weight_decay() != 0) absl::StrAppend(&s, " wd ", o.weight_decay());
  if (o.beta1() != 0 || o.beta2() != 0) {
    absl::StrAppend(&s, " betas ", o.beta1(), "/", o.beta2());
  }
  if (o.eps() != 0) absl::StrAppend(&s, " eps ", o.eps());
  if (o.alpha() != 0) absl::StrAppend(&s, " alpha ", o.alpha());
  if (o.centered()) absl::StrAppend(&s, " centered");
  if (o.trust_coefficient() != 0) {
    absl::StrAppend(&s, " trust ", o.trust_coefficient());
  }
  if (o.no_decay_bias_and_norm())
    absl::StrAppend(&s, " (no decay on biases, norms)");
  absl::StrAppend(&s, ", schedule ", LrSchedule::Kind_Name(l.kind()));
  if (l.kind() == LrSchedule::STEP) {
    absl::StrAppend(&s, " x", l.gamma(), " every ", l.step_size());
  } else if (l.kind() == LrSchedule::COSINE) {
    absl::StrAppend(&s, " to ", l.min_lr());
  } else if (l.kind() == LrSchedule::MULTI_STEP) {
    absl::StrAppend(&s, " x", l.gamma(), " at ",
                    absl::StrJoin(l.milestones(), ","));
  } else if (l.kind() == LrSchedule::EXPONENTIAL) {
    absl::StrAppend(&s, " x", l.gamma(), " a step");
  } else if (l.kind() == LrSchedule::POLYNOMIAL && l.power() != 0) {
    absl::StrAppend(&s, " power ", l.power());
  }
  if (l.warmup_steps() > 0) absl::StrAppend(&s, " warmup ", l.warmup_steps());
  return s;
}

}  // namespace

std::string DescribeJobSpec(const JobSpec& j) {
  std::string stop;
  if (j.epochs() > 0) stop = absl::StrCat(j.epochs(), " epochs");
  if (j.max_steps() > 0) {
    absl::StrAppend(&stop, stop.empty() ? "" : " or ", j.max_steps(), " steps");
  }
  return absl::StrCat(
      "job \"", j.name(), "\": model ", DescribeModel(j.model()), ", data ",
      DescribeData(j.data()), ", batch ", j.batch_size(),
      j.gradient_accumulation_steps() > 1
          ? absl::StrCat(" x ", j.gradient_accumulation_steps(), " accumulated")
          : "",
      ", ", stop, ", ", DescribeOptimizer(j.optimizer(), j.lr_schedule()));
}

uint64_t TrainingHash(const JobSpec& spec) {
  JobSpec math = spec;
  math.clear_name();
  math.clear_epochs();
  math.clear_max_steps();
  math.clear_eval();
  math.clear_cluster();
  math.clear_checkpoint();
  math.clear_log();
  // An imported graph is hashed with its ResNet blocks written out as the
  // branches that builds before the block fusion kept, so that their
  // checkpoints resume. Where the graph's file lies is not part of the
  // mathematics.
  if (!math.model().onnx().empty()) {
    ExpandResidualLayers(math.mutable_model()->mutable_layers());
  }
  math.mutable_model()->clear_onnx();
  math.mutable_data()->clear_dir();
  math.mutable_data()->clear_loader_threads();
  math.mutable_data()->clear_prefetch();
  math.mutable_ps()->clear_shards();
  math.mutable_ps()->clear_rpc_timeout_ms();
  // Cross-entropy was the implicit default before `loss` became optional:
  // checkpoints of such jobs keep their hash.
  if (math.loss() == CROSS_ENTROPY) math.clear_loss();
  if (math.gradient_accumulation_steps() == 1) {
    math.clear_gradient_accumulation_steps();
  }
  std::string bytes;
  google::protobuf::io::StringOutputStream out(&bytes);
  google::protobuf::io::CodedOutputStream coded(&out);
  coded.SetSerializationDeterministic(true);
  math.SerializeToCodedStream(&coded);
  coded.Trim();
  // FNV-1a: stable across builds and platforms, unlike std::hash.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace cohort
