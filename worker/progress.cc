#include "worker/progress.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace cohort {

Progress::Progress(bool live, bool quiet, double log_every_seconds,
                   int64_t batch)
    : live_(live),
      quiet_(quiet),
      every_(live ? absl::Milliseconds(100) : absl::Seconds(log_every_seconds)),
      start_(absl::Now()),
      last_print_(start_),
      last_rate_time_(start_) {}

void Progress::Step(int64_t epoch, int64_t step_in_epoch,
                    int64_t steps_per_epoch, int64_t step, int64_t total_steps,
                    int64_t samples, double loss) {
  // An exponential average shows a trend rather than batch-to-batch noise.
  loss_avg_ = loss_avg_ < 0 ? loss : 0.95 * loss_avg_ + 0.05 * loss;
  if (quiet_) return;
  const absl::Time now = absl::Now();
  if (now - last_print_ < every_ && step != total_steps) return;
  last_print_ = now;
  const double dt = absl::ToDoubleSeconds(now - last_rate_time_);
  if (dt > 0) rate_ = (samples - last_samples_) / dt;
  last_rate_time_ = now;
  last_samples_ = samples;
  const double elapsed = absl::ToDoubleSeconds(now - start_);
  const double eta =
      step > 0 ? elapsed * (total_steps - step) / static_cast<double>(step) : 0;
  const std::string line = absl::StrFormat(
      "epoch %d step %d/%d | %.0f samples/s | loss %.4f | ETA %.1fs", epoch + 1,
      step_in_epoch, steps_per_epoch, rate_, loss_avg_, eta);
  if (live_) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void Progress::EpochDone(
    int64_t epoch, double train_loss,
    const std::vector<std::pair<std::string, double>>& metrics,
    double seconds) {
  if (quiet_) return;
  if (live_) std::fprintf(stderr, "\r\033[K");
  std::string line = absl::StrFormat("epoch %d done in %.2fs | train loss %.4f",
                                     epoch + 1, seconds, train_loss);
  absl::StrAppend(&line, FormatTestMetrics(metrics));
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void Progress::Evaluated(
    int64_t step, const std::vector<std::pair<std::string, double>>& metrics) {
  if (quiet_) return;
  if (live_) std::fprintf(stderr, "\r\033[K");
  std::string line = absl::StrFormat("step %d evaluated", step);
  for (const auto& [name, value] : metrics) {
    if (name == "loss")
      absl::StrAppendFormat(&line, " | test loss %.4f", value);
  }
  absl::StrAppend(&line, FormatTestMetrics(metrics));
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

std::string FormatTestMetrics(
    const std::vector<std::pair<std::string, double>>& metrics) {
  std::string s;
  for (const auto& [name, value] : metrics) {
    if (name == "accuracy") {
      absl::StrAppendFormat(&s, " | test accuracy %.2f%%", 100.0 * value);
    } else if (name == "top5_accuracy") {
      absl::StrAppendFormat(&s, " | top-5 %.2f%%", 100.0 * value);
    } else if (name == "r2") {
      absl::StrAppendFormat(&s, " | test R² %.4f", value);
    } else if (name != "loss") {
      absl::StrAppendFormat(&s, " | test %s %.4g", name, value);
    }
  }
  return s;
}

}  // namespace cohort
