#include "worker/loop/tfevents.h"

#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/loop/tfrecord.h"

namespace cohort {
namespace {

// Protocol buffer wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// Event, Summary, Summary.Value and SessionLog field numbers (TensorBoard's
// event.proto and summary.proto).
constexpr int kEventWallTime = 1;
constexpr int kEventStep = 2;
constexpr int kEventFileVersion = 3;
constexpr int kEventSummary = 5;
constexpr int kEventSessionLog = 7;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1;
constexpr int kValueSimpleValue = 2;
constexpr int kSessionLogStatus = 1;
constexpr uint64_t kSessionStart = 1;

constexpr char kFileVersion[] = "brain.Event:2";

// Runs started on one machine within the same second, at most.
constexpr int kMaxSuffix = 1000;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(int field, int wire_type, std::string* out) {
  PutVarint(static_cast<uint64_t>(field) << 3 | wire_type, out);
}

void PutFixed(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

void PutBytes(int field, absl::string_view bytes, std::string* out) {
  PutTag(field, kLengthDelimited, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

// wall_time and step, as every event begins; a proto3 encoder leaves out a
// zero step, and so does this.
std::string EventHeader(double wall_time, int64_t step) {
  std::string e;
  uint64_t bits;
  std::memcpy(&bits, &wall_time, sizeof(bits));
  PutTag(kEventWallTime, kFixed64, &e);
  PutFixed(bits, 8, &e);
  if (step != 0) {
    PutTag(kEventStep, kVarint, &e);
    PutVarint(static_cast<uint64_t>(step), &e);
  }
  return e;
}

std::string EncodeValue(const ScalarValue& v) {
  std::string out;
  PutBytes(kValueTag, v.tag, &out);
  // A member of a oneof is written even when zero: it says which member
  // is set.
  const float f = static_cast<float>(v.value);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  PutTag(kValueSimpleValue, kFixed32, &out);
  PutFixed(bits, 4, &out);
  return out;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    return "localhost";
  }
  return host;
}

}  // namespace

double EventWallTime(absl::Time t) {
  return static_cast<double>(absl::ToUnixMicros(t)) / 1e6;
}

std::string FileVersionEvent(double wall_time) {
  std::string e = EventHeader(wall_time, 0);
  PutBytes(kEventFileVersion, kFileVersion, &e);
  return e;
}

std::string SessionStartEvent(double wall_time, int64_t step) {
  std::string log;
  PutTag(kSessionLogStatus, kVarint, &log);
  PutVarint(kSessionStart, &log);
  std::string e = EventHeader(wall_time, step);
  PutBytes(kEventSessionLog, log, &e);
  return e;
}

std::string ScalarsEvent(double wall_time, int64_t step,
                         const std::vector<ScalarValue>& values) {
  std::string summary;
  for (const ScalarValue& v : values) {
    PutBytes(kSummaryValue, EncodeValue(v), &summary);
  }
  std::string e = EventHeader(wall_time, step);
  PutBytes(kEventSummary, summary, &e);
  return e;
}

std::string EventFileName(absl::Time created, absl::string_view host) {
  std::string safe(host);
  for (char& c : safe) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '.' || c == '-' ||
                       c == '_';
    if (!plain) c = '_';
  }
  return absl::StrFormat("events.out.tfevents.%010d.%s",
                         absl::ToUnixSeconds(created), safe);
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(
    const std::string& dir, absl::Time now) {
  const std::string base =
      absl::StrCat(dir, "/", EventFileName(now, HostName()));
  for (int suffix = 0; suffix < kMaxSuffix; ++suffix) {
    const std::string path =
        suffix == 0 ? base : absl::StrCat(base, ".", suffix);
    absl::StatusOr<std::unique_ptr<AppendFile>> file =
        AppendFile::Open(path, /*exclusive=*/true);
    if (absl::IsAlreadyExists(file.status())) continue;
    if (!file.ok()) return file.status();
    std::unique_ptr<EventFileWriter> w(new EventFileWriter(*std::move(file)));
    w->Add(FileVersionEvent(EventWallTime(now)));
    return w;
  }
  return absl::AlreadyExistsError(absl::StrCat(base, " and ", kMaxSuffix - 1,
                                               " more names after it exist"));
}

void EventFileWriter::Add(absl::string_view event) {
  record_.clear();
  AppendTfRecord(event, &record_);
  file_->Append(record_);
}

}  // namespace cohort
