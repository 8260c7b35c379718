#include "client/ps_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/keepalive.h"
#include "client/ps_limits.h"
#include "common/logging.h"
#include "proto/ps.grpc.pb.h"

namespace cohort {
namespace {

// A pull may wait up to rpc_timeout (plus the restart window) on the shard
// itself; this much more lets the shard's own DEADLINE_EXCEEDED (naming the
// slow rank) arrive.
constexpr absl::Duration kPullGrace = absl::Seconds(5);
constexpr int64_t kPerChunk = kMaxChunkBytes / 4;
// Retries of UNAVAILABLE back off from this, doubling up to the maximum.
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(2);

std::chrono::system_clock::time_point ToChrono(absl::Time t) {
  return absl::ToChronoTime(t);
}

}  // namespace

struct PsClient::Shard {
  int index = 0;
  std::string address;
  const SecurityOptions* security = nullptr;  // for TLS hints
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<ParameterServer::Stub> stub;
  std::vector<Partition> partitions;
  absl::flat_hash_map<int32_t, size_t> by_id;  // partition id -> index
  int64_t version = 0;                         // of the last pull
  // This call's results, merged by the calling thread.
  int64_t bytes = 0;
  int64_t lag = 0;

  absl::Status Error(const char* op, absl::StatusCode code,
                     absl::string_view message) const {
    const std::string hint = code == absl::StatusCode::kUnavailable
                                 ? TlsHint(*security, message)
                                 : "";
    return absl::Status(
        code,
        absl::StrCat(op, " shard ", index, " at ", address, ": ",
                     absl::StatusCodeToString(code), ": ", message, hint));
  }
  absl::Status Error(const char* op, const grpc::Status& s) const {
    return Error(op, static_cast<absl::StatusCode>(s.error_code()),
                 s.error_message());
  }
};

namespace {

grpc::ChannelArguments ShardChannelArgs(int index) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // Reconnect promptly to a restarted shard; gRPC's backoff grows to 2 min.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  AddDataKeepalive(args);
  // A channel per shard, and a distinct one per client, so that each
  // shard's stream has its own connection.
  args.SetInt("cohort.ps_shard", index);
  return args;
}

}  // namespace

absl::Status PsClient::Connect(Shard& s, const std::string& address) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(address, options_.security, ShardChannelArgs(s.index));
  if (!channel.ok()) return channel.status();
  s.address = address;
  s.channel = *std::move(channel);
  s.stub = ParameterServer::NewStub(s.channel);
  return absl::OkStatus();
}

void PsClient::Readdress(Shard& s) {
  if (!options_.shard_address) return;
  absl::StatusOr<std::string> now = options_.shard_address(s.index);
  if (!now.ok() || now->empty() || *now == s.address) return;
  const std::string before = s.address;
  if (Connect(s, *now).ok()) {
    LOG(INFO) << "parameter-server shard " << s.index << " moved from "
              << before << " to " << s.address;
  }
}

template <typename Attempt>
grpc::Status PsClient::Retry(Shard& s, absl::Duration wait,
                             absl::Duration grace, const Attempt& attempt) {
  const absl::Time start = absl::Now();
  const absl::Time retry_until =
      start + options_.rpc_timeout + options_.restart_window;
  absl::Duration backoff = kFirstBackoff;
  int failures = 0;
  while (true) {
    const absl::Time deadline =
        std::min(absl::Now() + options_.rpc_timeout + wait, retry_until) +
        grace;
    grpc::Status st = attempt(deadline);
    const bool retry = st.error_code() == grpc::StatusCode::UNAVAILABLE &&
                       !IsTlsHandshakeFailure(st.error_message());
    if (!retry || absl::Now() + backoff >= retry_until) {
      if (st.ok() && failures > 0) {
        LOG(WARNING) << "parameter-server shard " << s.index << " at "
                     << s.address << " answered again after "
                     << absl::FormatDuration(absl::Now() - start) << " and "
                     << failures << " failed attempts";
      }
      return st;
    }
    ++failures;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
    Readdress(s);
  }
}

// One thread per shard, each running its shard's part of the current call:
// Start() hands the threads a function and returns, Wait() collects the
// statuses. A call costs two condition-variable hand-offs per shard, not a
// thread start.
class PsClient::ShardThreads {
 public:
  explicit ShardThreads(int n) : which_(n), results_(n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { Loop(i); });
  }
  ~ShardThreads() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  // Runs fn(i) on thread i for every i with which[i]; `fn` must stay valid
  // until Wait() returns. One call at a time.
  void Start(const std::vector<bool>& which,
             std::function<absl::Status(int)> fn) {
    absl::MutexLock lock(&mu_);
    fn_ = std::move(fn);
    which_ = which;
    for (size_t i = 0; i < which.size(); ++i) {
      results_[i] = absl::OkStatus();
      if (which[i]) ++running_;
    }
    ++generation_;
  }

  // The statuses of the last Start(), by thread, once all are done.
  std::vector<absl::Status> Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* running) { return *running == 0; }, &running_));
    return results_;
  }

 private:
  void Loop(int i) {
    uint64_t seen = 0;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto ready = [&] { return stop_ || generation_ != seen; };
        mu_.Await(absl::Condition(&ready));
        if (stop_) return;
        seen = generation_;
        if (!which_[i]) continue;
      }
      // fn_ changes only in Start(), which waits for this call (Wait()).
      absl::Status s = fn_(i);
      absl::MutexLock lock(&mu_);
      results_[i] = std::move(s);
      --running_;
    }
  }

  absl::Mutex mu_;
  std::function<absl::Status(int)> fn_;
  std::vector<bool> which_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

PsClient::PsClient(const PsClientOptions& options) : options_(options) {}
PsClient::~PsClient() = default;

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(
    const PsClientOptions& options) {
  if (options.shard_addresses.empty()) {
    return absl::InvalidArgumentError("parameter server: no shard addresses");
  }
  std::unique_ptr<PsClient> c(new PsClient(options));
  for (size_t i = 0; i < options.shard_addresses.size(); ++i) {
    auto s = std::make_unique<Shard>();
    s->index = i;
    s->security = &c->options_.security;
    if (absl::Status st = c->Connect(*s, options.shard_addresses[i]);
        !st.ok()) {
      return st;
    }
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
  c->threads_ = std::make_unique<ShardThreads>(c->shards_.size());
  return c;
}

std::vector<bool> PsClient::Busy() const {
  // Shards with nothing to do (no partitions) are skipped.
  std::vector<bool> which(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    which[i] = !shards_[i]->partitions.empty();
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
  grpc::Status st = Retry(s, none, none, [&](absl::Time d) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(d));
    InitResponse response;
    auto writer = s.stub->Init(&ctx, &response);
    InitRequest msg;
    InitHeader* h = msg.mutable_header();
    h->set_worker_id(options_.worker_id);
    for (const Partition& p : s.partitions) *h->add_partitions() = p;
    h->set_world_size(world_size);
    h->set_total_replicas(total_replicas);
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
  if (!st.ok()) return s.Error("init of", st);
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

absl::Status PsClient::PushShard(Shard& s) {
  // Backward finishes the last parameters first: the partition with the
  // highest offset is the first to send. The stream opens with it.
  std::vector<const Partition*> order;
  for (const Partition& p : s.partitions) order.push_back(&p);
  std::sort(order.begin(), order.end(),
            [](const Partition* a, const Partition* b) {
              return a->offset() > b->offset();
            });
  AwaitReady(order.front()->offset() + order.front()->count());
  PushResponse response;
  int64_t bytes = 0;
  // A retry keeps push_seq_: the shard tells whether it has this push.
  const absl::Duration none = absl::ZeroDuration();
  grpc::Status st = Retry(s, none, none, [&](absl::Time d) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(d));
    auto writer = s.stub->Push(&ctx, &response);
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
    bytes = 0;
    TensorChunk* chunk = msg.mutable_chunk();
    for (const Partition* p : order) {
      AwaitReady(p->offset());
      chunk->set_partition(p->id());
      const float* g = push_grads_ + p->offset();
      for (int64_t off = 0; ok && off < p->count(); off += kPerChunk) {
        const int64_t len = std::min(kPerChunk, p->count() - off);
        chunk->set_offset(off);
        chunk->set_data(reinterpret_cast<const char*>(g + off), len * 4);
        ok = writer->Write(msg);
        bytes += len * 4;
      }
    }
    writer->WritesDone();
    return writer->Finish();
  });
  if (!st.ok()) return s.Error("push to", st);
  s.bytes = bytes;
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
  }
  for (auto& s : shards_) {
    s->bytes = 0;
    s->lag = 0;
  }
  threads_->Start(Busy(), [this](int i) { return PushShard(*shards_[i]); });
}

void PsClient::MarkReady(int64_t from) {
  absl::MutexLock lock(&ready_mu_);
  ready_from_ = std::min(ready_from_, from);
}

absl::Status PsClient::FinishPush() {
  const absl::Time start = absl::Now();
  MarkReady(0);
  absl::Status st = FirstError(threads_->Wait());
  stats_.push_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  for (const auto& s : shards_) {
    stats_.bytes_pushed += s->bytes;
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
      Retry(s, options_.restart_window, kPullGrace, [&](absl::Time d) {
        grpc::ClientContext ctx;
        ctx.set_deadline(ToChrono(d));
        PullRequest req;
        req.set_worker_id(options_.worker_id);
        req.set_rank(options_.rank);
        req.set_clock(clock);
        auto reader = s.stub->Pull(&ctx, req);
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
  if (!bad.ok()) return s.Error("pull from", bad.code(), bad.message());
  if (!st.ok()) return s.Error("pull from", st);
  int64_t expected = 0;
  for (const Partition& p : s.partitions) expected += p.count();
  if (elements != expected) {
    return s.Error(
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
  stats_.pull_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  for (const auto& s : shards_) stats_.bytes_pulled += s->bytes;
  return st;
}

PsClient::Stats PsClient::TakeStats() {
  Stats s = stats_;
  stats_ = Stats();
  return s;
}

}  // namespace cohort
