// An in-process parameter-server shard for tests of the client and the
// worker's exchange: a real gRPC server on loopback that records what it is
// sent (Init headers, pushes with their row chunks, PullRows requests and
// every message's size) and answers with values a test can predict.
//
// A pull returns the parameters Init stored; a row pull returns
// FakeRowValue(table, row, d) for every element, after checking that the
// shard owns the row. Messages over kMaxMessageBytes are refused by gRPC,
// as the real shard refuses them.
//
// Ownership: a FakePsShard owns its server. Thread safety: the service's
// handlers run on gRPC's threads; tests read the records through
// Snapshot(), which locks.
#ifndef COHORT_CLIENT_FAKE_PS_SERVICE_H_
#define COHORT_CLIENT_FAKE_PS_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "proto/ps.grpc.pb.h"

namespace cohort {

// Element d of row `row` of table `table` as the fake serves it: exact in
// float for rows below 2^22 of table 0 and below 2^21 of the others.
inline float FakeRowValue(int table, int64_t row, int64_t d) {
  return static_cast<float>(row * 4 + d) + 0.5f * static_cast<float>(table);
}

// One push as the fake received it.
struct FakePush {
  PushHeader header;
  std::vector<TensorChunk> chunks;
  std::vector<RowChunk> rows;
};

// What a fake shard has seen so far.
struct FakeShardRecord {
  std::vector<InitHeader> inits;
  std::vector<FakePush> pushes;
  std::vector<PullRequest> pulls;
  std::vector<PullRowsRequest> row_pulls;
  size_t largest_message = 0;  // bytes, over every message received
};

class FakePsShard final : public ParameterServer::Service {
 public:
  // Shard `index` of `shards`; `table_dims` by table id.
  FakePsShard(int index, int shards, std::vector<int> table_dims);
  ~FakePsShard() override;

  std::string address() const { return address_; }
  FakeShardRecord Snapshot();

  // The next `n` calls of PullRows fail with UNAVAILABLE.
  void FailRowPulls(int n);
  // Every later PullRows fails with `code` (OK: they succeed).
  void RefuseRowPulls(grpc::StatusCode code);
  // Row chunks of a PullRows answer hold at most this many rows, and echo
  // their ids or not.
  void SetAnswerChunks(int64_t rows, bool with_ids);
  // Answers miss their last row.
  void DropLastRow();

  grpc::Status Init(grpc::ServerContext* ctx,
                    grpc::ServerReader<InitRequest>* reader,
                    InitResponse* response) override;
  grpc::Status Push(grpc::ServerContext* ctx,
                    grpc::ServerReader<PushRequest>* reader,
                    PushResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* ctx, const PullRequest* request,
                    grpc::ServerWriter<PullResponse>* writer) override;
  grpc::Status PullRows(grpc::ServerContext* ctx,
                        const PullRowsRequest* request,
                        grpc::ServerWriter<PullRowsResponse>* writer) override;

 private:
  void Saw(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answer to `request`, or a refusal.
  grpc::Status AnswerRows(const PullRowsRequest& request,
                          std::vector<RowChunk>* out);

  const int index_;
  const int shards_;
  const std::vector<int> dims_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  absl::Mutex mu_;
  FakeShardRecord record_ ABSL_GUARDED_BY(mu_);
  // Init's partitions and values, by partition id.
  std::map<int32_t, Partition> partitions_ ABSL_GUARDED_BY(mu_);
  std::map<int32_t, std::string> values_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_row_pulls_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::StatusCode refuse_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::OK;
  int64_t answer_rows_ ABSL_GUARDED_BY(mu_) = 7;
  bool answer_ids_ ABSL_GUARDED_BY(mu_) = true;
  bool drop_last_ ABSL_GUARDED_BY(mu_) = false;
};

// `n` fake shards of one job.
std::vector<std::unique_ptr<FakePsShard>> StartFakeShards(
    int n, const std::vector<int>& table_dims);
std::vector<std::string> Addresses(
    const std::vector<std::unique_ptr<FakePsShard>>& shards);

}  // namespace cohort

#endif  // COHORT_CLIENT_FAKE_PS_SERVICE_H_
