#include "server/report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"

namespace cohort {
namespace {

void Key(std::string* s, const char* key, const std::string& value) {
  absl::StrAppend(s, "  \"", key, "\": ", value, ",\n");
}

std::string MetricsJson(
    const google::protobuf::RepeatedPtrField<Metric>& metrics) {
  std::vector<std::pair<std::string, double>> kv;
  for (const Metric& m : metrics) kv.emplace_back(m.name(), m.value());
  return JsonObject(kv);
}

}  // namespace

std::string JobReportJson(const JobReport& r) {
  const WorkerResult* r0 =
      !r.results.empty() && r.results[0] ? &*r.results[0] : nullptr;
  auto from_rank0 = [&](auto field) -> std::string {
    return r0 ? field(*r0) : "null";
  };
  bool any = false;
  int64_t samples = 0;
  double samples_per_s = 0;
  int64_t skipped = 0;
  for (const std::optional<WorkerResult>& w : r.results) {
    if (!w) continue;
    any = true;
    samples += w->samples();
    samples_per_s += w->samples_per_s();
    skipped += w->skipped_samples();
  }
  const std::string model = r0 && !r0->model().empty() ? r0->model() : r.model;
  std::string s = "{\n";
  Key(&s, "job", JsonString(r.job_name));
  Key(&s, "model", model.empty() ? "null" : JsonString(model));
  Key(&s, "parameters", from_rank0([](const WorkerResult& w) {
    return absl::StrCat(w.parameters());
  }));
  Key(&s, "replicas", absl::StrCat(r.total_replicas));
  Key(&s, "threads", "null");
  Key(&s, "steps", from_rank0([](const WorkerResult& w) {
    return absl::StrCat(w.steps());
  }));
  Key(&s, "epochs", from_rank0([](const WorkerResult& w) {
    return absl::StrCat(w.epochs());
  }));
  Key(&s, "samples", any ? absl::StrCat(samples) : "null");
  Key(&s, "samples_per_s", any ? JsonNumber(samples_per_s) : "null");
  Key(&s, "train_seconds", from_rank0([](const WorkerResult& w) {
    return JsonNumber(w.train_seconds());
  }));
  Key(&s, "eval_seconds", "null");
  Key(&s, "setup_seconds", "null");
  Key(&s, "final_loss", from_rank0([](const WorkerResult& w) {
    return JsonNumber(w.final_loss());
  }));
  Key(&s, "test_accuracy", from_rank0([](const WorkerResult& w) {
    return JsonOptional(w.test_accuracy());
  }));
  Key(&s, "test_loss", from_rank0([](const WorkerResult& w) {
    return JsonOptional(w.test_loss());
  }));
  Key(&s, "test_metrics", from_rank0([](const WorkerResult& w) {
    return MetricsJson(w.test_metrics());
  }));
  Key(&s, "skipped_samples", any ? absl::StrCat(skipped) : "null");
  Key(&s, "stopped_early", from_rank0([](const WorkerResult& w) {
    return std::string(w.stopped_early() ? "true" : "false");
  }));
  const bool best =
      r0 != nullptr && r0->best_step() >= 0 && !r0->best_metric_name().empty();
  Key(&s, "best_metric_name",
      best ? JsonString(r0->best_metric_name()) : "null");
  // All the digits: runs are compared by it.
  Key(&s, "best_metric",
      best && std::isfinite(r0->best_metric())
          ? absl::StrFormat("%.17g", r0->best_metric())
          : "null");
  Key(&s, "best_step", best ? absl::StrCat(r0->best_step()) : "null");
  Key(&s, "final_lr",
      r0 != nullptr && r0->has_final_lr()
          ? absl::StrFormat("%.9g", r0->final_lr())
          : "null");
  Key(&s, "epoch_results", from_rank0([](const WorkerResult& w) {
    std::string out = "[";
    for (int i = 0; i < w.epoch_results_size(); ++i) {
      const EpochSummary& e = w.epoch_results(i);
      absl::StrAppend(&out, i ? ",\n" : "\n", "    {\"epoch\": ", e.epoch(),
                      ", \"steps\": ", e.steps(),
                      ", \"train_loss\": ", JsonNumber(e.train_loss()),
                      ", \"test_loss\": ", JsonOptional(e.test_loss()),
                      ", \"test_accuracy\": ", JsonOptional(e.test_accuracy()),
                      ", \"test_metrics\": ", MetricsJson(e.test_metrics()),
                      ", \"seconds\": ", JsonNumber(e.seconds()),
                      ", \"wall_seconds\": ", JsonNumber(e.wall_seconds()),
                      "}");
    }
    return absl::StrCat(out, w.epoch_results_size() ? "\n  ]" : "]");
  }));
  Key(&s, "world_size", absl::StrCat(r.world_size));
  Key(&s, "state", JsonString(JobState_Name(r.state)));
  absl::StrAppend(&s, "  \"reason\": ", JsonString(r.reason), "\n}\n");
  return s;
}

}  // namespace cohort
