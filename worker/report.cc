// JSON reports of a training run (see trainer.h).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "common/json.h"
#include "worker/trainer.h"

namespace cohort {

std::string ReportJson(const TrainResult& r) {
  std::string s = "{\n";
  absl::StrAppend(&s, "  \"job\": ", JsonString(r.job_name), ",\n");
  absl::StrAppend(&s, "  \"model\": ", JsonString(r.model), ",\n");
  absl::StrAppend(&s, "  \"parameters\": ", r.parameters, ",\n");
  absl::StrAppend(&s, "  \"replicas\": ", r.replicas, ",\n");
  absl::StrAppend(&s, "  \"threads\": ", r.threads, ",\n");
  absl::StrAppend(&s, "  \"steps\": ", r.steps, ",\n");
  absl::StrAppend(&s, "  \"epochs\": ", r.epochs, ",\n");
  absl::StrAppend(&s, "  \"samples\": ", r.samples, ",\n");
  absl::StrAppend(&s, "  \"samples_per_s\": ", JsonNumber(r.samples_per_s),
                  ",\n");
  absl::StrAppend(&s, "  \"train_seconds\": ", JsonNumber(r.train_seconds),
                  ",\n");
  absl::StrAppend(&s, "  \"eval_seconds\": ", JsonNumber(r.eval_seconds),
                  ",\n");
  absl::StrAppend(&s, "  \"setup_seconds\": ", JsonNumber(r.setup_seconds),
                  ",\n");
  absl::StrAppend(&s, "  \"final_loss\": ", JsonNumber(r.final_loss), ",\n");
  absl::StrAppend(&s, "  \"test_accuracy\": ", JsonOptional(r.test_accuracy),
                  ",\n");
  absl::StrAppend(&s, "  \"test_loss\": ", JsonOptional(r.test_loss), ",\n");
  absl::StrAppend(&s, "  \"test_metrics\": ", JsonObject(r.test_metrics),
                  ",\n");
  absl::StrAppend(
      &s, "  \"final_lr\": ",
      r.final_lr >= 0 ? absl::StrFormat("%.9g", r.final_lr) : "null", ",\n");
  absl::StrAppend(&s, "  \"skipped_steps\": ", r.skipped_steps, ",\n");
  absl::StrAppend(&s, "  \"skipped_samples\": ", r.skipped_samples, ",\n");
  absl::StrAppend(
      &s, "  \"stopped_early\": ", r.stopped_early ? "true" : "false", ",\n");
  absl::StrAppend(&s, "  \"best_metric_name\": ",
                  r.best_step >= 0 ? JsonString(r.best_metric_name) : "null",
                  ",\n");
  absl::StrAppend(&s, "  \"best_metric\": ",
                  r.best_step >= 0 && std::isfinite(r.best_metric)
                      ? absl::StrFormat("%.17g", r.best_metric)
                      : "null",
                  ",\n");
  absl::StrAppend(&s, "  \"best_step\": ",
                  r.best_step >= 0 ? absl::StrCat(r.best_step) : "null", ",\n");
  s += "  \"epoch_results\": [";
  for (size_t i = 0; i < r.epoch_results.size(); ++i) {
    const EpochResult& e = r.epoch_results[i];
    absl::StrAppend(&s, i ? ",\n" : "\n", "    {\"epoch\": ", e.epoch + 1,
                    ", \"steps\": ", e.steps,
                    ", \"train_loss\": ", JsonNumber(e.train_loss),
                    ", \"train_accuracy\": ", JsonNumber(e.train_accuracy),
                    ", \"test_loss\": ", JsonOptional(e.test_loss),
                    ", \"test_accuracy\": ", JsonOptional(e.test_accuracy),
                    ", \"test_metrics\": ", JsonObject(e.test_metrics),
                    ", \"seconds\": ", JsonNumber(e.seconds), "}");
  }
  s += r.epoch_results.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return s;
}

absl::Status WriteReport(const std::string& path, const TrainResult& result) {
  return WriteFileAtomically(path, ReportJson(result));
}

}  // namespace cohort
