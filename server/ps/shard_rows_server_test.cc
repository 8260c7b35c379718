// The sparse tables over a real gRPC shard server on loopback: Init with
// tables, Push with row chunks, PullRows' stream (chunks within the limits,
// tables and ids in the request's order), and the refusals.
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ps_limits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "server/ps/shard_rows_test_util.h"
#include "server/ps/shard_server.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using namespace rows_test;  // NOLINT: the shared test helpers

// Shard `index` of `shards`, and a raw stub to it.
struct Server {
  std::unique_ptr<ShardServer> server;
  std::unique_ptr<ParameterServer::Stub> stub;

  Server(const JobSpec& job, int index) {
    ShardServerOptions o;
    o.job = job;
    o.shard_index = index;
    auto s = ShardServer::Start(o);
    EXPECT_TRUE(s.ok()) << s.status();
    server = *std::move(s);
    stub = ParameterServer::NewStub(grpc::CreateChannel(
        server->address(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Init(const std::vector<SparseTableInfo>& tables) {
    grpc::ClientContext ctx;
    InitResponse response;
    auto writer = stub->Init(&ctx, &response);
    InitRequest msg;
    InitHeader* h = msg.mutable_header();
    h->set_worker_id("w0");
    h->set_world_size(1);
    h->set_total_replicas(1);
    for (const SparseTableInfo& t : tables) *h->add_tables() = t;
    writer->Write(msg);
    writer->WritesDone();
    return writer->Finish();
  }

  // A push of `rows` (after a header, and `extra` after them).
  grpc::Status Push(uint64_t seq, const std::vector<RowChunk>& rows,
                    const std::vector<PushRequest>& extra = {}) {
    grpc::ClientContext ctx;
    PushResponse response;
    auto writer = stub->Push(&ctx, &response);
    PushRequest msg;
    *msg.mutable_header() = Header(0, seq, seq - 1, 1.0);
    writer->Write(msg);
    for (const RowChunk& r : rows) {
      *msg.mutable_rows() = r;
      writer->Write(msg);
    }
    for (const PushRequest& m : extra) writer->Write(m);
    writer->WritesDone();
    return writer->Finish();
  }

  // The whole PullRows stream.
  grpc::Status PullRows(const PullRowsRequest& request,
                        std::vector<PullRowsResponse>* out) {
    grpc::ClientContext ctx;
    auto reader = stub->PullRows(&ctx, request);
    PullRowsResponse msg;
    while (reader->Read(&msg)) out->push_back(msg);
    return reader->Finish();
  }
};

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

TEST(ShardRowsServerTest, PullRowsStreamsTheRowsInTheRequestsOrder) {
  Server s(Job(ASYNC, 1, OptimizerSpec::SGD), 0);
  const std::vector<SparseTableInfo> tables = {Table(0, 1 << 20, 1),
                                               Table(1, 100, 64)};
  ASSERT_TRUE(s.Init(tables).ok());
  ASSERT_TRUE(s.Init(tables).ok());  // a retry
  {
    // No partitions: a pull answers with the header alone.
    grpc::ClientContext ctx;
    PullRequest pull;
    pull.set_worker_id("w0");
    auto reader = s.stub->Pull(&ctx, pull);
    std::vector<PullResponse> parts;
    PullResponse msg;
    while (reader->Read(&msg)) parts.push_back(msg);
    ASSERT_TRUE(reader->Finish().ok());
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_TRUE(parts[0].has_header());
  }
  // Row 7 of table 1 is stepped: lr 1, gradient 0.5 everywhere.
  grpc::Status pushed = s.Push(1, {Rows(1, {7}, std::vector<float>(64, 0.5f))});
  ASSERT_TRUE(pushed.ok()) << pushed.error_message();

  // 200000 one-float rows need several chunks; then table 1, with a repeat.
  PullRowsRequest request;
  request.set_worker_id("w0");
  std::vector<int64_t> many;
  for (int64_t i = 0; i < 200000; ++i) many.push_back((i * 7919) % (1 << 20));
  *request.add_tables() = Rows(0, many, {});
  const std::vector<int64_t> few = {7, 3, 7};
  *request.add_tables() = Rows(1, few, {});
  std::vector<PullRowsResponse> got;
  grpc::Status st = s.PullRows(request, &got);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_GE(got.size(), 3u);
  ASSERT_TRUE(got[0].has_header());
  EXPECT_EQ(got[0].header().version(), 1);
  std::vector<std::vector<int64_t>> ids(2);
  std::vector<std::vector<float>> values(2);
  int chunks0 = 0;
  int32_t last_table = 0;
  for (size_t i = 1; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].has_rows());
    const RowChunk& c = got[i].rows();
    ASSERT_GE(c.table(), last_table) << "tables out of the request's order";
    last_table = c.table();
    EXPECT_LE(static_cast<int64_t>(c.data().size()), kMaxChunkBytes);
    EXPECT_LE(static_cast<int64_t>(got[i].ByteSizeLong()), kMaxMessageBytes);
    ASSERT_EQ(c.data().size(), c.ids_size() * tables[c.table()].dim() * 4u);
    ids[c.table()].insert(ids[c.table()].end(), c.ids().begin(), c.ids().end());
    const std::vector<float> v = Floats(c.data());
    values[c.table()].insert(values[c.table()].end(), v.begin(), v.end());
    if (c.table() == 0) ++chunks0;
  }
  EXPECT_GT(chunks0, 1);
  EXPECT_EQ(ids[0], many);
  EXPECT_EQ(values[0], InitRows(tables[0], many));
  EXPECT_EQ(ids[1], few);
  std::vector<float> want = InitRows(tables[1], few);
  for (int d = 0; d < 64; ++d) {
    want[d] -= 0.5f;
    want[128 + d] -= 0.5f;
  }
  EXPECT_EQ(values[1], want);
  const ShardStats stats = s.server->Stats();
  EXPECT_EQ(stats.rows_held(), 1);
  EXPECT_EQ(stats.rows_pushed(), 1);
  EXPECT_EQ(stats.rows_pulled(), 200003);
}

TEST(ShardRowsServerTest, BadRowsAreRefusedWithClearMessages) {
  Server s(Job(ASYNC, 2, OptimizerSpec::SGD), 0);
  ASSERT_TRUE(s.Init({Table(0, 100, 2)}).ok());
  const int64_t theirs = OwnedRows(0, 1, 2, 1)[0];
  const int64_t mine = OwnedRows(0, 0, 2, 1)[0];

  grpc::Status st = s.Push(1, {Rows(0, {theirs}, {1, 1})});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(),
              HasSubstr(absl::StrCat("push from rank 0: table 0 ('2.0.weight') "
                                     "row id ",
                                     theirs, " belongs to shard 1")));
  PushRequest header;
  *header.mutable_header() = Header(0, 1, 0, 1.0);
  st = s.Push(1, {Rows(0, {mine}, {1, 1})}, {header});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("a second header"));

  PullRowsRequest request;
  *request.add_tables() = Rows(0, {mine, theirs}, {});
  std::vector<PullRowsResponse> got;
  st = s.PullRows(request, &got);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(),
              HasSubstr("pull of rows from rank 0 for clock 0 on shard 0"));
  EXPECT_THAT(st.error_message(), HasSubstr("belongs to shard 1"));
  EXPECT_TRUE(got.empty());
  const ShardStats stats = s.server->Stats();
  EXPECT_EQ(stats.pushes(), 0);
  EXPECT_EQ(stats.rows_held(), 0);

  // Seq 1 is still unused.
  st = s.Push(1, {Rows(0, {mine}, {1, 1})});
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(s.server->Stats().rows_held(), 1);
}

}  // namespace
}  // namespace cohort
