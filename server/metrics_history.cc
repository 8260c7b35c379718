#include "server/metrics_history.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace cohort {

MetricsHistory::MetricsHistory(size_t capacity, absl::Time start)
    : capacity_(std::max<size_t>(capacity, 2)), start_(start) {}

void MetricsHistory::Record(const StatusResponse& status, absl::Time now) {
  if (status.state() != RUNNING) return;
  int64_t step = 0;
  double loss_sum = 0, samples_per_s = 0;
  int losses = 0;
  bool progress = false;
  absl::MutexLock lock(&mu_);
  for (const WorkerStatus& w : status.workers()) {
    const WorkerProgress& p = w.progress();
    if (p.step() <= 0) continue;
    progress = true;
    step = std::max(step, p.step());
    samples_per_s += p.samples_per_s();
    // A diverged worker's NaN would hide the others' loss; it still shows
    // in the workers table.
    if (std::isfinite(p.loss())) {
      loss_sum += p.loss();
      ++losses;
    }
    if (p.finished_epoch() > 0 && p.finished_epoch_test_accuracy() >= 0) {
      AddEpoch(p.finished_epoch(), p.finished_epoch_test_accuracy(), w.rank(),
               now);
    }
  }
  if (!progress) return;
  if (calls_++ % stride_ != 0) return;
  if (samples_.size() == capacity_) {
    // Keep samples 0, 2, 4...: the kept ones are stride_ calls apart, as
    // every later one will be.
    size_t kept = 0;
    for (size_t i = 0; i < samples_.size(); i += 2)
      samples_[kept++] = samples_[i];
    samples_.resize(kept);
    stride_ *= 2;
    // This call is kept only if it falls on the new stride.
    if ((calls_ - 1) % stride_ != 0) return;
  }
  samples_.push_back(Sample{absl::ToDoubleSeconds(now - start_), step,
                            losses > 0 ? loss_sum / losses : std::nan(""),
                            samples_per_s});
}

void MetricsHistory::RecordResult(int rank, const WorkerResult& result,
                                  absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (const EpochSummary& e : result.epoch_results()) {
    if (e.epoch() > 0 && e.test_accuracy() >= 0) {
      AddEpoch(e.epoch(), e.test_accuracy(), rank, now);
    }
  }
}

void MetricsHistory::AddEpoch(int64_t epoch, double accuracy, int rank,
                              absl::Time now) {
  auto it = epochs_.find(epoch);
  if (it != epochs_.end()) {
    // Ranks evaluate the same parameters; one curve, from the lowest rank
    // that reported (rank 0 unless it died), its first report kept.
    if (rank >= it->second.rank) return;
    it->second.accuracy = accuracy;
    it->second.rank = rank;
    return;
  }
  epochs_[epoch] =
      EpochPoint{accuracy, absl::ToDoubleSeconds(now - start_), rank};
  while (epochs_.size() > kMaxEpochs) epochs_.erase(epochs_.begin());
}

std::string MetricsHistory::Json() const {
  absl::MutexLock lock(&mu_);
  std::string t, step, loss, rate;
  for (const Sample& s : samples_) {
    const char* sep = t.empty() ? "" : ",";
    absl::StrAppend(&t, sep, JsonNumber(s.t));
    absl::StrAppend(&step, sep, s.step);
    absl::StrAppend(&loss, sep, JsonNumber(s.loss));
    absl::StrAppend(&rate, sep, JsonNumber(s.samples_per_s));
  }
  std::string epochs;
  for (const auto& [epoch, p] : epochs_) {
    absl::StrAppend(&epochs, epochs.empty() ? "" : ",", "{\"epoch\":", epoch,
                    ",\"test_accuracy\":", JsonNumber(p.accuracy),
                    ",\"t\":", JsonNumber(p.t), "}");
  }
  return absl::StrCat("{\"interval_s\":", stride_, ",\"t\":[", t,
                      "],\"step\":[", step, "],\"loss\":[", loss,
                      "],\"samples_per_s\":[", rate, "],\"epochs\":[", epochs,
                      "]}\n");
}

}  // namespace cohort
