#include "worker/timeline.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/json.h"

namespace cohort {
namespace {

std::string LaneName(int lane) {
  if (lane == Timeline::kStepLane) return "step";
  if (lane >= Timeline::kBucketLane) {
    return absl::StrCat("communication ", lane - Timeline::kBucketLane);
  }
  return absl::StrCat("replica ", lane);
}

}  // namespace

Timeline::Timeline(int pid, std::string process_name)
    : pid_(pid), process_name_(std::move(process_name)) {}

void Timeline::SetProcess(int pid, std::string process_name) {
  absl::MutexLock lock(&mu_);
  pid_ = pid;
  process_name_ = std::move(process_name);
}

void Timeline::Add(absl::string_view name, int lane, absl::Time start,
                   absl::Time end, absl::string_view args_json) {
  const int64_t start_us = absl::ToUnixMicros(start);
  const int64_t duration_us =
      std::max<int64_t>(0, absl::ToUnixMicros(end) - start_us);
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(events_.size()) >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(Event{std::string(name), lane, start_us, duration_us,
                          std::string(args_json)});
}

int64_t Timeline::size() const {
  absl::MutexLock lock(&mu_);
  return events_.size();
}

std::string Timeline::ToJson() const {
  absl::MutexLock lock(&mu_);
  std::string out = "{\"displayTimeUnit\": \"ms\",\n";
  absl::StrAppend(&out, "\"otherData\": {\"dropped_events\": ", dropped_,
                  "},\n\"traceEvents\": [\n");
  absl::StrAppend(
      &out, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": ", pid_,
      ", \"tid\": 0, \"args\": {\"name\": ", JsonString(process_name_), "}}");
  std::set<int> lanes;
  for (const Event& e : events_) lanes.insert(e.lane);
  for (int lane : lanes) {
    absl::StrAppend(
        &out, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": ", pid_,
        ", \"tid\": ", lane,
        ", \"args\": {\"name\": ", JsonString(LaneName(lane)), "}}");
  }
  for (const Event& e : events_) {
    absl::StrAppend(&out, ",\n{\"ph\": \"X\", \"name\": ", JsonString(e.name),
                    ", \"pid\": ", pid_, ", \"tid\": ", e.lane,
                    ", \"ts\": ", e.start_us, ", \"dur\": ", e.duration_us);
    if (!e.args.empty()) absl::StrAppend(&out, ", \"args\": {", e.args, "}");
    out += "}";
  }
  out += "\n]}\n";
  return out;
}

absl::Status Timeline::Write(const std::string& path) const {
  return WriteFileAtomically(path, ToJson());
}

}  // namespace cohort
