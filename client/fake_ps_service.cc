#include "client/fake_ps_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/ps_limits.h"
#include "client/ps_rows.h"
#include "common/sparse_rows.h"

namespace cohort {

FakePsShard::FakePsShard(int index, int shards, std::vector<int> table_dims)
    : index_(index), shards_(shards), dims_(std::move(table_dims)) {
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.SetMaxReceiveMessageSize(kMaxMessageBytes);
  b.RegisterService(this);
  server_ = b.BuildAndStart();
  address_ = absl::StrCat("127.0.0.1:", port);
}

FakePsShard::~FakePsShard() { server_->Shutdown(); }

FakeShardRecord FakePsShard::Snapshot() {
  absl::MutexLock lock(&mu_);
  return record_;
}

void FakePsShard::FailRowPulls(int n) {
  absl::MutexLock lock(&mu_);
  fail_row_pulls_ = n;
}

void FakePsShard::RefuseRowPulls(grpc::StatusCode code) {
  absl::MutexLock lock(&mu_);
  refuse_ = code;
}

void FakePsShard::SetAnswerChunks(int64_t rows, bool with_ids) {
  absl::MutexLock lock(&mu_);
  answer_rows_ = rows;
  answer_ids_ = with_ids;
}

void FakePsShard::DropLastRow() {
  absl::MutexLock lock(&mu_);
  drop_last_ = true;
}

void FakePsShard::Saw(size_t bytes) {
  record_.largest_message = std::max(record_.largest_message, bytes);
}

grpc::Status FakePsShard::Init(grpc::ServerContext*,
                               grpc::ServerReader<InitRequest>* reader,
                               InitResponse*) {
  InitRequest msg;
  absl::MutexLock lock(&mu_);
  while (reader->Read(&msg)) {
    Saw(msg.ByteSizeLong());
    if (msg.has_header()) {
      record_.inits.push_back(msg.header());
      for (const Partition& p : msg.header().partitions()) {
        partitions_[p.id()] = p;
        values_[p.id()].assign(p.count() * 4, '\0');
      }
      continue;
    }
    const TensorChunk& c = msg.chunk();
    values_[c.partition()].replace(c.offset() * 4, c.data().size(), c.data());
  }
  return grpc::Status::OK;
}

grpc::Status FakePsShard::Push(grpc::ServerContext*,
                               grpc::ServerReader<PushRequest>* reader,
                               PushResponse* response) {
  FakePush push;
  PushRequest msg;
  size_t largest = 0;
  while (reader->Read(&msg)) {
    largest = std::max(largest, msg.ByteSizeLong());
    if (msg.has_header()) {
      push.header = msg.header();
    } else if (msg.has_chunk()) {
      push.chunks.push_back(msg.chunk());
    } else {
      push.rows.push_back(msg.rows());
    }
  }
  absl::MutexLock lock(&mu_);
  Saw(largest);
  record_.pushes.push_back(std::move(push));
  response->set_version(++version_);
  return grpc::Status::OK;
}

grpc::Status FakePsShard::Pull(grpc::ServerContext*, const PullRequest* request,
                               grpc::ServerWriter<PullResponse>* writer) {
  std::vector<PullResponse> out(1);
  {
    absl::MutexLock lock(&mu_);
    record_.pulls.push_back(*request);
    out[0].mutable_header()->set_version(version_);
    out[0].mutable_header()->set_min_clock(request->clock());
    for (const auto& [id, p] : partitions_) {
      const std::string& v = values_[id];
      for (size_t off = 0; off < v.size(); off += kMaxChunkBytes) {
        TensorChunk* c = out.emplace_back().mutable_chunk();
        c->set_partition(id);
        c->set_offset(off / 4);
        c->set_data(v.substr(off, kMaxChunkBytes));
      }
    }
  }
  for (const PullResponse& m : out) writer->Write(m);
  return grpc::Status::OK;
}

grpc::Status FakePsShard::AnswerRows(const PullRowsRequest& request,
                                     std::vector<RowChunk>* out) {
  absl::MutexLock lock(&mu_);
  for (const RowChunk& want : request.tables()) {
    const int t = want.table();
    if (t < 0 || t >= static_cast<int>(dims_.size())) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("no table ", t));
    }
    const int64_t per = std::min(answer_rows_, RowsPerChunk(dims_[t]));
    for (int i = 0; i < want.ids_size(); ++i) {
      const int64_t id = want.ids(i);
      if (SparseRowOwner(t, id, shards_) != index_) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("row ", id, " of table ", t,
                                         " is not shard ", index_, "'s"));
      }
      if (i % per == 0) out->emplace_back().set_table(t);
      if (answer_ids_) out->back().add_ids(id);
      for (int d = 0; d < dims_[t]; ++d) {
        const float v = FakeRowValue(t, id, d);
        out->back().mutable_data()->append(reinterpret_cast<const char*>(&v),
                                           4);
      }
    }
  }
  if (drop_last_ && !out->empty()) {
    RowChunk& last = out->back();
    last.mutable_data()->resize(last.data().size() - 4 * dims_[last.table()]);
    if (last.ids_size() > 0) last.mutable_ids()->RemoveLast();
  }
  return grpc::Status::OK;
}

grpc::Status FakePsShard::PullRows(
    grpc::ServerContext*, const PullRowsRequest* request,
    grpc::ServerWriter<PullRowsResponse>* writer) {
  {
    absl::MutexLock lock(&mu_);
    Saw(request->ByteSizeLong());
    record_.row_pulls.push_back(*request);
    if (fail_row_pulls_ > 0) {
      --fail_row_pulls_;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake outage");
    }
    if (refuse_ != grpc::StatusCode::OK) {
      return grpc::Status(refuse_, "refused by the fake");
    }
  }
  std::vector<RowChunk> rows;
  grpc::Status st = AnswerRows(*request, &rows);
  if (!st.ok()) return st;
  PullRowsResponse msg;
  msg.mutable_header()->set_min_clock(request->clock());
  writer->Write(msg);
  for (RowChunk& c : rows) {
    *msg.mutable_rows() = std::move(c);
    writer->Write(msg);
  }
  return grpc::Status::OK;
}

std::vector<std::unique_ptr<FakePsShard>> StartFakeShards(
    int n, const std::vector<int>& table_dims) {
  std::vector<std::unique_ptr<FakePsShard>> shards;
  for (int i = 0; i < n; ++i) {
    shards.push_back(std::make_unique<FakePsShard>(i, n, table_dims));
  }
  return shards;
}

std::vector<std::string> Addresses(
    const std::vector<std::unique_ptr<FakePsShard>>& shards) {
  std::vector<std::string> out;
  for (const auto& s : shards) out.push_back(s->address());
  return out;
}

}  // namespace cohort
