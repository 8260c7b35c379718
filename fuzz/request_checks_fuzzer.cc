// Fuzzes the coordinator's request checks (server/request_checks.h): the
// input's first byte picks a request type, the rest is parsed as that
// message's wire format (as gRPC would) and handed to its check.
//
// Properties: no check crashes; a refusal is INVALID_ARGUMENT, or
// FAILED_PRECONDITION for a protocol version mismatch; FillClusterDefaults
// is idempotent; QuoteForMessage stays short and printable.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/proto_mutator.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "server/request_checks.h"

namespace cohort {
namespace {

// Parses `bytes` as a Request and runs `check` on it; OK when it does not
// parse (gRPC refuses such a message before any handler runs).
template <typename Request, absl::Status (*check)(const Request&)>
absl::Status Check(absl::string_view bytes) {
  Request request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::OkStatus();
  }
  return check(request);
}

absl::Status CheckCluster(const ClusterSpec& spec) {
  ClusterSpec filled = spec;
  FillClusterDefaults(&filled);
  ClusterSpec twice = filled;
  FillClusterDefaults(&twice);
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(filled, twice),
             "FillClusterDefaults is not idempotent");
  return CheckClusterSpec(filled);
}

absl::Status CheckMisc(absl::string_view bytes) {
  const std::string quoted = QuoteForMessage(bytes);
  FUZZ_CHECK(quoted.size() <= 4 * 64 + 40, "quoted text too long");
  for (char c : quoted) {
    FUZZ_CHECK(std::isprint(static_cast<unsigned char>(c)),
               "unprintable byte in a quoted text");
  }
  if (bytes.size() >= 8) {
    int32_t rank, world;
    std::memcpy(&rank, bytes.data(), 4);
    std::memcpy(&world, bytes.data() + 4, 4);
    const absl::Status s = CheckRank("rank", rank, world);
    FUZZ_CHECK(s.ok() == (rank >= 0 && rank < world), "CheckRank is wrong");
    if (bytes.size() >= 24) {
      uint64_t got, current;
      std::memcpy(&got, bytes.data() + 8, 8);
      std::memcpy(&current, bytes.data() + 16, 8);
      FUZZ_CHECK(StaleGeneration(got, current).code() ==
                     absl::StatusCode::kFailedPrecondition,
                 "StaleGeneration is not FAILED_PRECONDITION");
    }
    return s;
  }
  return absl::OkStatus();
}

// One request type: its message (for the mutator) and its check.
struct Handler {
  const google::protobuf::Message* prototype;
  absl::Status (*check)(absl::string_view bytes);
};

// Indexed by the input's first byte, modulo the size; the last entry takes
// raw bytes (CheckMisc).
const std::vector<Handler>& Handlers() {
  static const auto* handlers = new std::vector<Handler>{
      {&JoinRequest::default_instance(), &Check<JoinRequest, CheckJoinRequest>},
      {&HeartbeatRequest::default_instance(),
       &Check<HeartbeatRequest, CheckHeartbeatRequest>},
      {&KvSetRequest::default_instance(),
       &Check<KvSetRequest, CheckKvSetRequest>},
      {&KvGetRequest::default_instance(),
       &Check<KvGetRequest, CheckKvGetRequest>},
      {&KvWaitRequest::default_instance(),
       &Check<KvWaitRequest, CheckKvWaitRequest>},
      {&KvAddRequest::default_instance(),
       &Check<KvAddRequest, CheckKvAddRequest>},
      {&BeginEpochRequest::default_instance(),
       &Check<BeginEpochRequest, CheckBeginEpochRequest>},
      {&FinishRequest::default_instance(),
       &Check<FinishRequest, CheckFinishRequest>},
      {&StopRequest::default_instance(), &Check<StopRequest, CheckStopRequest>},
      {&RegisterShardRequest::default_instance(),
       &Check<RegisterShardRequest, CheckRegisterShardRequest>},
      {&ShardHeartbeatRequest::default_instance(),
       &Check<ShardHeartbeatRequest, CheckShardHeartbeatRequest>},
      {&PlanPartitionsRequest::default_instance(),
       &Check<PlanPartitionsRequest, CheckPlanPartitionsRequest>},
      {&ClusterSpec::default_instance(), &Check<ClusterSpec, CheckCluster>},
      {nullptr, &CheckMisc},
  };
  return *handlers;
}

const Handler& HandlerFor(uint8_t which) {
  return Handlers()[which % Handlers().size()];
}

}  // namespace
}  // namespace cohort

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

// The selector byte stays (mostly); the message behind it is mutated as
// that type.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                          size_t max_size, unsigned seed) {
  const google::protobuf::Message* prototype =
      size > 0 ? cohort::HandlerFor(data[0]).prototype : nullptr;
  if (prototype == nullptr || seed % 16 == 0 || max_size < 2) {
    return LLVMFuzzerMutate(data, size, max_size);
  }
  return 1 + cohort::fuzz::MutateProtoInput(*prototype, data + 1, size - 1,
                                            max_size - 1, seed);
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cohort::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::Status s = cohort::HandlerFor(data[0]).check(
      cohort::fuzz::AsView(data + 1, size - 1));
  FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
                 s.code() == absl::StatusCode::kFailedPrecondition,
             cohort::fuzz::Describe("unexpected refusal", s));
  return 0;
}
