#include "client/ps_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/ps_limits.h"
#include "client/ps_shard.h"
#include "client/shard_threads.h"
#include "common/half_convert.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"

namespace cohort {
namespace {

// A pull may wait up to rpc_timeout (plus the restart window) on the shard
// itself; this much more lets the shard's own DEADLINE_EXCEEDED (naming the
// slow rank) arrive.
constexpr absl::Duration kPullGrace = absl::Seconds(5);
constexpr int64_t kPerChunk = kMaxChunkBytes / 4;

std::chrono::system_clock::time_point ToChrono(absl::Time t) {
  return absl::ToChronoTime(t);
}

// A chunk's data in `encoding`: floats as they are, or rounded to 16 bits
// (FP16 saturating at its largest value, so no push carries infinity).
void SetChunkData(TensorChunk::Encoding encoding, const float* values,
                  int64_t n, std::vector<uint16_t>* words, TensorChunk* chunk) {
  if (encoding == TensorChunk::FLOAT32) {
    chunk->set_data(reinterpret_cast<const char*>(values), n * 4);
    return;
  }
  words->resize(n);
  FloatToHalf(
      encoding == TensorChunk::FLOAT16 ? HalfFormat::kFp16 : HalfFormat::kBf16,
      values, 1.0f, kFp16Max, words->data(), n);
  chunk->set_data(reinterpret_cast<const char*>(words->data()), n * 2);
}

// Runs fn(0) .. fn(n - 1) at once, fn(0) on the calling thread.
void RunInParallel(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(fn, i);
  if (n > 0) fn(0);
  for (std::thread& t : threads) t.join();
}

}  // namespace

// A shard's connection and what the client's calls keep about it. Only the
// shard's own thread touches the fields below `link`.
struct PsClient::Shard {
  std::unique_ptr<PsShard> link;
  std::vector<Partition> partitions;
  absl::flat_hash_map<int32_t, size_t> by_id;  // partition id -> index
  int64_t version = 0;                         // of the last pull
  // This call's results, merged by the calling thread.
  int64_t bytes = 0;
  int64_t rows = 0;
  int64_t lag = 0;
};

PsClient::PsClient(const PsClientOptions& options) : options_(options) {}
PsClient::~PsClient() = default;

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(
    const PsClientOptions& options) {
  if (options.shard_addresses.empty()) {
    return absl::InvalidArgumentError("parameter server: no shard addresses");
  }
  if (absl::Status st = CheckSparseTables(options.tables); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter server: ", st.message()));
  }
  std::unique_ptr<PsClient> c(new PsClient(options));
  for (size_t i = 0; i < options.shard_addresses.size(); ++i) {
    auto s = std::make_unique<Shard>();
    absl::StatusOr<std::unique_ptr<PsShard>> link =
        PsShard::Connect(i, options.shard_addresses[i], &c->options_);
    if (!link.ok()) return link.status();
    s->link = *std::move(link);
    c->shards_.push_back(std::move(s));
  }
  for (const Partition& p : options.partitions) {
    if (p.shard() < 0 || p.shard() >= static_cast<int>(c->shards_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter server: partition ", p.id(), " is on shard ", p.shard(),
          " but there are ", c->shards_.size(), " shard addresses"));
    }
    if (p.offset() < 0 || p.count() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter server: partition ", p.id(), " has offset ",
                       p.offset(), " and count ", p.count()));
    }
    Shard& s = *c->shards_[p.shard()];
    s.by_id[p.id()] = s.partitions.size();
    s.partitions.push_back(p);
  }
  c->push_rows_.resize(c->shards_.size());
  c->threads_ = std::make_unique<ShardThreads>(c->shards_.size());
  return c;
}

std::vector<bool> PsClient::Busy() const {
  // Without sparse tables, shards with nothing to do (no partitions) are
  // skipped.
  std::vector<bool> which(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    which[i] = !shards_[i]->partitions.empty() || !options_.tables.empty();
  }
  return which;
}

absl::Status PsClient::FirstError(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PsClient::ForEachShard(
    const std::function<absl::Status(Shard&)>& fn) {
  threads_->Start(Busy(), [&](int i) { return fn(*shards_[i]); });
  return FirstError(threads_->Wait());
}

absl::Status PsClient::InitShard(Shard& s, const float* params, int world_size,
                                 int total_replicas) {
  const absl::Duration none = absl::ZeroDuration();
  grpc::Status st = s.link->Retry(none, none, [&](absl::Time d) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(d));
    InitResponse response;
    auto writer = s.link->stub()->Init(&ctx, &response);
    InitRequest msg;
    InitHeader* h = msg.mutable_header();
    h->set_worker_id(options_.worker_id);
    for (const Partition& p : s.partitions) *h->add_partitions() = p;
    h->set_world_size(world_size);
    h->set_total_replicas(total_replicas);
    for (const SparseTableInfo& t : options_.tables) *h->add_tables() = t;
    bool ok = writer->Write(msg);
    TensorChunk* chunk = msg.mutable_chunk();
    for (const Partition& p : s.partitions) {
      chunk->set_partition(p.id());
      for (int64_t off = 0; ok && off < p.count(); off += kPerChunk) {
        const int64_t len = std::min(kPerChunk, p.count() - off);
        chunk->set_offset(off);
        chunk->set_data(
            reinterpret_cast<const char*>(params + p.offset() + off), len * 4);
        ok = writer->Write(msg);
      }
    }
    writer->WritesDone();
    return writer->Finish();
  });
  if (!st.ok()) return s.link->Error("init of", st);
  return absl::OkStatus();
}

absl::Status PsClient::Init(const float* params, int world_size,
                            int total_replicas) {
  return ForEachShard([&](Shard& s) {
    return InitShard(s, params, world_size, total_replicas);
  });
}

void PsClient::AwaitReady(int64_t offset) {
  absl::MutexLock lock(&ready_mu_);
  auto ready = [this, offset]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ready_mu_) {
    return ready_from_ <= offset;
  };
  ready_mu_.Await(absl::Condition(&ready));
}

const std::vector<PsRows>& PsClient::AwaitRows(int shard) {
  absl::MutexLock lock(&ready_mu_);
  ready_mu_.Await(absl::Condition(&rows_set_));
  return push_rows_[shard];
}

bool PsClient::WritePush(Shard& s, const std::vector<const Partition*>& order,
                         grpc::ClientWriterInterface<PushRequest>* writer,
                         int64_t* bytes) {
  PushRequest msg;
  PushHeader* h = msg.mutable_header();
  h->set_worker_id(options_.worker_id);
  h->set_rank(options_.rank);
  h->set_seq(push_seq_);
  h->set_clock(push_.clock);
  h->set_based_on_version(s.version);
  h->set_lr(push_.lr);
  h->set_weight(push_.weight);
  h->set_first_chunk(push_.first_chunk);
  bool ok = writer->Write(msg);
  TensorChunk* chunk = msg.mutable_chunk();
  chunk->set_encoding(options_.push_encoding);
  std::vector<uint16_t> words;
  for (const Partition* p : order) {
    AwaitReady(p->offset());
    chunk->set_partition(p->id());
    const float* g = push_grads_ + p->offset();
    for (int64_t off = 0; ok && off < p->count(); off += kPerChunk) {
      const int64_t len = std::min(kPerChunk, p->count() - off);
      chunk->set_offset(off);
      SetChunkData(options_.push_encoding, g + off, len, &words, chunk);
      ok = writer->Write(msg);
      *bytes += static_cast<int64_t>(chunk->data().size());
    }
  }
  if (ok && !options_.tables.empty()) {
    ok = WriteRowChunks(AwaitRows(s.link->index()), options_.tables, writer,
                        bytes);
  }
  return ok;
}

absl::Status PsClient::PushShard(Shard& s) {
  // Backward finishes the last parameters first: the partition with the
  // highest offset is the first to send. The stream opens with it, or, on
  // a shard without partitions, once the rows are known.
  std::vector<const Partition*> order;
  for (const Partition& p : s.partitions) order.push_back(&p);
  std::sort(order.begin(), order.end(),
            [](const Partition* a, const Partition* b) {
              return a->offset() > b->offset();
            });
  if (order.empty()) {
    AwaitRows(s.link->index());
  } else {
    AwaitReady(order.front()->offset() + order.front()->count());
  }
  PushResponse response;
  int64_t bytes = 0;
  // A retry keeps push_seq_: the shard tells whether it has this push.
  const absl::Duration none = absl::ZeroDuration();
  grpc::Status st = s.link->Retry(none, none, [&](absl::Time d) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(d));
    auto writer = s.link->stub()->Push(&ctx, &response);
    bytes = 0;
    WritePush(s, order, writer.get(), &bytes);
    writer->WritesDone();
    return writer->Finish();
  });
  if (!st.ok()) return s.link->Error("push to", st);
  s.bytes = bytes;
  if (!options_.tables.empty()) {
    for (const PsRows& r : AwaitRows(s.link->index())) s.rows += r.ids.size();
  }
  s.lag = std::max<int64_t>(0, response.version() - s.version);
  return absl::OkStatus();
}

void PsClient::BeginPush(const float* grads, const PsPush& push) {
  push_grads_ = grads;
  push_ = push;
  push_seq_ = ++seq_;
  {
    absl::MutexLock lock(&ready_mu_);
    ready_from_ = std::numeric_limits<int64_t>::max();
    rows_set_ = false;
    for (std::vector<PsRows>& rows : push_rows_) rows.clear();
  }
  for (auto& s : shards_) {
    s->bytes = 0;
    s->rows = 0;
    s->lag = 0;
  }
  threads_->Start(Busy(), [this](int i) { return PushShard(*shards_[i]); });
}

void PsClient::MarkReady(int64_t from) {
  absl::MutexLock lock(&ready_mu_);
  ready_from_ = std::min(ready_from_, from);
}

absl::Status PsClient::SetPushRows(const std::vector<PsRows>& rows) {
  absl::StatusOr<std::vector<std::vector<PsRows>>> split =
      SplitRowsByOwner(rows, options_.tables, shards_.size());
  absl::MutexLock lock(&ready_mu_);
  CHECK(!rows_set_) << "SetPushRows called twice in one push";
  if (split.ok()) push_rows_ = *std::move(split);
  rows_set_ = true;
  return split.status();
}

absl::Status PsClient::FinishPush() {
  const absl::Time start = absl::Now();
  MarkReady(0);
  {
    absl::MutexLock lock(&ready_mu_);
    rows_set_ = true;
  }
  absl::Status st = FirstError(threads_->Wait());
  absl::MutexLock lock(&stats_mu_);
  stats_.push_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  for (const auto& s : shards_) {
    stats_.bytes_pushed += s->bytes;
    stats_.rows_pushed += s->rows;
    stats_.max_version_lag = std::max(stats_.max_version_lag, s->lag);
  }
  push_grads_ = nullptr;
  return st;
}

absl::Status PsClient::Push(const float* grads, const PsPush& push) {
  BeginPush(grads, push);
  return FinishPush();
}

absl::Status PsClient::PullShard(Shard& s, int64_t clock, float* params) {
  int64_t version = 0;
  absl::Status bad;  // a malformed response (not retried)
  int64_t elements = 0;
  // The shard bounds a pull's wait for slow ranks by rpc_timeout plus the
  // restart window (client/restart_window.h); the grace comes after.
  grpc::Status st =
      s.link->Retry(options_.restart_window, kPullGrace, [&](absl::Time d) {
        grpc::ClientContext ctx;
        ctx.set_deadline(ToChrono(d));
        PullRequest req;
        req.set_worker_id(options_.worker_id);
        req.set_rank(options_.rank);
        req.set_clock(clock);
        auto reader = s.link->stub()->Pull(&ctx, req);
        PullResponse msg;
        bool header = false;
        elements = 0;
        while (bad.ok() && reader->Read(&msg)) {
          if (msg.has_header()) {
            header = true;
            version = msg.header().version();
            continue;
          }
          const TensorChunk& c = msg.chunk();
          auto it = s.by_id.find(c.partition());
          const int64_t n = c.data().size() / 4;
          if (!header || it == s.by_id.end() || c.data().size() % 4 != 0 ||
              c.offset() < 0 ||
              c.offset() + n > s.partitions[it->second].count()) {
            bad = absl::DataLossError(absl::StrCat(
                "malformed chunk of partition ", c.partition(), " at offset ",
                c.offset(), " (", c.data().size(), " bytes)"));
            ctx.TryCancel();
            break;
          }
          const Partition& p = s.partitions[it->second];
          std::memcpy(params + p.offset() + c.offset(), c.data().data(),
                      c.data().size());
          elements += n;
        }
        return reader->Finish();
      });
  if (!bad.ok()) return s.link->Error("pull from", bad.code(), bad.message());
  if (!st.ok()) return s.link->Error("pull from", st);
  int64_t expected = 0;
  for (const Partition& p : s.partitions) expected += p.count();
  if (elements != expected) {
    return s.link->Error(
        "pull from", absl::StatusCode::kDataLoss,
        absl::StrCat("got ", elements, " elements, expected ", expected));
  }
  s.version = version;
  s.bytes = elements * 4;
  return absl::OkStatus();
}

absl::Status PsClient::Pull(int64_t clock, float* params) {
  const absl::Time start = absl::Now();
  absl::Status st = ForEachShard([&](Shard& s) {
    s.bytes = 0;
    return PullShard(s, clock, params);
  });
  absl::MutexLock lock(&stats_mu_);
  stats_.pull_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  for (const auto& s : shards_) stats_.bytes_pulled += s->bytes;
  return st;
}

absl::Status PsClient::PullRowsShard(PsShard& shard, int64_t clock,
                                     std::vector<RowsPullCall>& calls,
                                     int64_t* rows, int64_t* bytes) {
  for (RowsPullCall& call : calls) {
    call.request.set_worker_id(options_.worker_id);
    call.request.set_rank(options_.rank);
    call.request.set_clock(clock);
    RowsPullReader got(&call, &options_.tables);
    absl::Status bad;  // a malformed response (not retried)
    grpc::Status st =
        shard.Retry(options_.restart_window, kPullGrace, [&](absl::Time d) {
          grpc::ClientContext ctx;
          ctx.set_deadline(ToChrono(d));
          auto reader = shard.stub()->PullRows(&ctx, call.request);
          PullRowsResponse msg;
          bool header = false;
          got.Reset();
          while (bad.ok() && reader->Read(&msg)) {
            if (msg.has_header()) {
              header = true;
            } else if (!header) {
              bad = absl::DataLossError("rows before the header");
            } else {
              bad = got.Add(msg.rows());
            }
            if (!bad.ok()) ctx.TryCancel();
          }
          return reader->Finish();
        });
    if (!bad.ok())
      return shard.Error("pull rows from", bad.code(), bad.message());
    if (!st.ok()) return shard.Error("pull rows from", st);
    if (!got.done()) {
      return shard.Error(
          "pull rows from", absl::StatusCode::kDataLoss,
          absl::StrCat("got ", got.rows(), " rows, expected ", got.expected()));
    }
    *rows += got.rows();
    *bytes += got.bytes();
  }
  return absl::OkStatus();
}

absl::Status PsClient::PullRows(int64_t clock,
                                absl::Span<const PsRowRequest> requests) {
  ASSIGN_OR_RETURN(std::vector<std::vector<RowsPullCall>> plan,
                   PlanRowsPull(requests, options_.tables, shards_.size()));
  std::vector<int> owners;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (!plan[i].empty()) owners.push_back(i);
  }
  std::vector<absl::Status> results(owners.size());
  std::vector<int64_t> rows(owners.size()), bytes(owners.size());
  RunInParallel(owners.size(), [&](int j) {
    const int s = owners[j];
    results[j] =
        PullRowsShard(*shards_[s]->link, clock, plan[s], &rows[j], &bytes[j]);
  });
  absl::MutexLock lock(&stats_mu_);
  for (size_t j = 0; j < owners.size(); ++j) {
    stats_.rows_pulled += rows[j];
    stats_.bytes_pulled += bytes[j];
  }
  return FirstError(results);
}

PsClient::Stats PsClient::TakeStats() {
  absl::MutexLock lock(&stats_mu_);
  return std::exchange(stats_, Stats());
}

}  // namespace cohort
