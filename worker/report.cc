// JSON reports of a training run (see trainer.h).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "worker/trainer.h"

namespace cohort {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// JSON has no NaN or infinity; a diverged loss is reported as null.
std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

// -1 marks "not measured" inside the engine; JSON says null.
std::string Optional(double v) { return v < 0 ? "null" : Num(v); }

}  // namespace

std::string ReportJson(const TrainResult& r) {
  std::string s = "{\n";
  absl::StrAppend(&s, "  \"job\": ", Quote(r.job_name), ",\n");
  absl::StrAppend(&s, "  \"model\": ", Quote(r.model), ",\n");
  absl::StrAppend(&s, "  \"parameters\": ", r.parameters, ",\n");
  absl::StrAppend(&s, "  \"replicas\": ", r.replicas, ",\n");
  absl::StrAppend(&s, "  \"threads\": ", r.threads, ",\n");
  absl::StrAppend(&s, "  \"steps\": ", r.steps, ",\n");
  absl::StrAppend(&s, "  \"epochs\": ", r.epochs, ",\n");
  absl::StrAppend(&s, "  \"samples\": ", r.samples, ",\n");
  absl::StrAppend(&s, "  \"samples_per_s\": ", Num(r.samples_per_s), ",\n");
  absl::StrAppend(&s, "  \"train_seconds\": ", Num(r.train_seconds), ",\n");
  absl::StrAppend(&s, "  \"eval_seconds\": ", Num(r.eval_seconds), ",\n");
  absl::StrAppend(&s, "  \"setup_seconds\": ", Num(r.setup_seconds), ",\n");
  absl::StrAppend(&s, "  \"final_loss\": ", Num(r.final_loss), ",\n");
  absl::StrAppend(&s, "  \"test_accuracy\": ", Optional(r.test_accuracy),
                  ",\n");
  absl::StrAppend(&s, "  \"test_loss\": ", Optional(r.test_loss), ",\n");
  s += "  \"epoch_results\": [";
  for (size_t i = 0; i < r.epoch_results.size(); ++i) {
    const EpochResult& e = r.epoch_results[i];
    absl::StrAppend(&s, i ? ",\n" : "\n", "    {\"epoch\": ", e.epoch + 1,
                    ", \"steps\": ", e.steps,
                    ", \"train_loss\": ", Num(e.train_loss),
                    ", \"train_accuracy\": ", Num(e.train_accuracy),
                    ", \"test_loss\": ", Optional(e.test_loss),
                    ", \"test_accuracy\": ", Optional(e.test_accuracy),
                    ", \"seconds\": ", Num(e.seconds), "}");
  }
  s += r.epoch_results.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return s;
}

absl::Status WriteReport(const std::string& path, const TrainResult& result) {
  return WriteFileAtomically(path, ReportJson(result));
}

}  // namespace cohort
