// Fuzzes the job spec loader (common/spec.h) with arbitrary text.
//
// Properties: a rejected spec is INVALID_ARGUMENT with a message naming the
// file; an accepted one survives the round trip the header promises
// (printing the normalised spec and parsing it again gives the same spec and
// the same TrainingHash), and DescribeJobSpec works on it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "common/spec.h"
#include "fuzz/fuzz_util.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/job.pb.h"

namespace cohort {
namespace {

constexpr char kFile[] = "fuzz.textproto";

void CheckRoundTrip(const JobSpec& spec) {
  std::string printed;
  FUZZ_CHECK(google::protobuf::TextFormat::PrintToString(spec, &printed),
             "cannot print an accepted spec");
  absl::StatusOr<JobSpec> again = ParseJobSpec(printed, "printed.textproto");
  FUZZ_CHECK(again.ok(),
             fuzz::Describe("the printed form of an accepted spec is "
                            "rejected\n" +
                                printed,
                            again.status()));
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(spec, *again),
             "normalisation is not idempotent:\n" + printed + "\nbecomes\n" +
                 again->DebugString());
  FUZZ_CHECK(TrainingHash(spec) == TrainingHash(*again),
             "TrainingHash changes over a round trip");
  FUZZ_CHECK(!DescribeJobSpec(spec).empty(), "empty description");
  // Known bug (reported): text escapes such as "\377" give strings that are
  // not UTF-8, which proto3 refuses to parse, so such a spec cannot reach a
  // worker (JoinResponse.job) although ParseJobSpec accepted it.
  if (fuzz::CheckKnownBugs()) {
    JobSpec wire;
    FUZZ_CHECK(wire.ParseFromString(spec.SerializeAsString()),
               "an accepted spec does not survive the wire:\n" + printed);
  }
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cohort::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using cohort::fuzz::Describe;
  absl::StatusOr<cohort::JobSpec> spec =
      cohort::ParseJobSpec(cohort::fuzz::AsView(data, size), cohort::kFile);
  if (spec.ok()) {
    cohort::CheckRoundTrip(*spec);
    return 0;
  }
  FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument,
             Describe("rejection is not INVALID_ARGUMENT", spec.status()));
  FUZZ_CHECK(absl::StartsWith(spec.status().message(), cohort::kFile),
             Describe("rejection does not name the file", spec.status()));
  return 0;
}
