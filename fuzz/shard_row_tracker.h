// The sparse tables' side of fuzz/shard_fuzzer.cc: what a fuzz case did to
// a shard's rows (the ids of the pushes applied, the rows whose gradients
// were too large or not finite), and the properties checked against it:
//   - a row no applied push named reads as its initial value
//     (SparseRowInit), which is finite;
//   - a row whose every gradient was finite and below kTameGradient, in a
//     case whose every learning rate was below kTameLr, reads finite: each
//     rule the tables accept moves a row by at most about 10 * lr * |g| a
//     step, and an input holds at most a few thousand steps, so nothing
//     can reach infinity;
//   - the rows held never exceed the ids applied (SSP and ASYNC store a
//     push's rows at once: then they are equal);
//   - a refused or duplicate push changes neither the rows held nor any row
//     the case pulled before (Observe before and after it).
//
// Ownership: a RowTracker owns its records and reads the ShardState it is
// given. Thread safety: none needed; libFuzzer runs one input at a time.
#ifndef COHORT_FUZZ_SHARD_ROW_TRACKER_H_
#define COHORT_FUZZ_SHARD_ROW_TRACKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "google/protobuf/repeated_field.h"
#include "proto/ps.pb.h"
#include "server/ps/shard_rows.h"
#include "server/ps/shard_state.h"

namespace cohort {
namespace fuzz {

class RowTracker {
 public:
  static constexpr float kTameGradient = 1 << 20;
  static constexpr double kTameLr = 1 << 10;
  // Rows whose values Observe reads (the first ones the case pulled).
  static constexpr size_t kMaxWatched = 32;

  // What Observe saw: the rows held and the watched rows' values (none
  // while the shard cannot be read, before Init).
  struct Seen {
    int64_t held = 0;
    std::optional<std::vector<float>> watched;
  };

  // Before a push stream goes to the shard: notes the rows of its row
  // chunks whose gradients are not tame, and a learning rate that is not.
  void NoteSent(const google::protobuf::RepeatedPtrField<PushRequest>& push);
  // The shard applied (not as a duplicate) a push of these rows.
  void NoteApplied(const PushedRows& rows);

  // Checks a successful PullRows of `request` against the tables `layout`
  // and the records, and watches its first rows.
  void CheckPulled(const SparseLayout& layout, const PullRowsRequest& request,
                   const ShardState::RowsSnapshot& snap);
  // Checks the rows the shard holds now against the ids applied.
  void CheckHeld(const ShardState& state, Consistency consistency) const;

  Seen Observe(ShardState& state) const;
  // Aborts (FUZZ_CHECK) unless `after` equals `before`, bit for bit; `what`
  // names the push.
  static void CheckUnchanged(const Seen& before, const Seen& after,
                             const std::string& what);

 private:
  using Row = std::pair<int32_t, int64_t>;  // table, id

  void CheckRow(const SparseTableInfo& table, int64_t id, const float* values);

  absl::flat_hash_set<Row> applied_;
  absl::flat_hash_set<Row> wild_;  // gradients not finite or not tame
  bool wild_lr_ = false;
  std::vector<Row> watched_;
  absl::flat_hash_set<Row> watched_set_;
};

}  // namespace fuzz
}  // namespace cohort

#endif  // COHORT_FUZZ_SHARD_ROW_TRACKER_H_
