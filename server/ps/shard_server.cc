#include "server/ps/shard_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/keepalive.h"
#include "client/ps_limits.h"
#include "common/listen.h"
#include "common/logging.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "proto/ps.grpc.pb.h"
#include "server/gated_service.h"
#include "server/ps/shard_checkpoint.h"
#include "server/ps/shard_state.h"

namespace cohort {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

absl::Time DeadlineOf(const grpc::ServerContext* ctx) {
  const auto d = ctx->deadline();
  if (d == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(d);
}

// Reads the rest of a stream whose outcome is already known, so the client
// gets the answer instead of a broken stream.
template <typename Reader, typename Message>
void Drain(Reader* reader, Message* scratch) {
  while (reader->Read(scratch)) {
  }
}

}  // namespace

// Every method checks the job token before it reads a message
// (common/security.h says why not in an interceptor): Init and Push, whose
// handlers run once the metadata has arrived, first thing; Pull, whose
// request gRPC would otherwise read before its handler, through
// GatedService (server/gated_service.h).
class ShardServer::Service final : public GatedService<ParameterServer> {
 public:
  Service(ShardState* state, TokenCheck token_check)
      : state_(state), token_check_(std::move(token_check)) {
    GateServerStreaming<PullRequest, PullResponse>(
        "Pull",
        [this](grpc::ServerContext* ctx, const PullRequest* request,
               grpc::internal::WriterInterface<PullResponse>* writer) {
          return ServePull(ctx, request, writer);
        },
        [this](grpc::ServerContext* ctx,
               const std::function<grpc::Status()>& serve) {
          if (grpc::Status a = token_check_.Check(ctx); !a.ok()) return a;
          return serve();
        });
    GateServerStreaming<PullRowsRequest, PullRowsResponse>(
        "PullRows",
        [this](grpc::ServerContext* ctx, const PullRowsRequest* request,
               grpc::internal::WriterInterface<PullRowsResponse>* writer) {
          return ServePullRows(ctx, request, writer);
        },
        [this](grpc::ServerContext* ctx,
               const std::function<grpc::Status()>& serve) {
          if (grpc::Status a = token_check_.Check(ctx); !a.ok()) return a;
          return serve();
        });
    CheckAllGated();
  }

  grpc::Status Init(grpc::ServerContext* ctx,
                    grpc::ServerReader<InitRequest>* reader,
                    InitResponse* response) override {
    if (grpc::Status a = token_check_.Check(ctx); !a.ok()) return a;
    InitRequest req;
    if (!reader->Read(&req) || !req.has_header()) {
      return ToGrpc(absl::InvalidArgumentError(
          "init: the first message must be the header"));
    }
    const InitHeader header = req.header();
    absl::StatusOr<bool> already = state_->CheckInit(header);
    if (!already.ok()) return ToGrpc(already.status());
    if (*already) {
      Drain(reader, &req);
      response->set_already_initialized(true);
      return grpc::Status::OK;
    }
    std::vector<Partition> layout(header.partitions().begin(),
                                  header.partitions().end());
    absl::StatusOr<std::vector<std::vector<float>>> values = Assemble(
        reader, &req, layout, absl::StrCat("init from ", header.worker_id()));
    if (!values.ok()) return ToGrpc(values.status());
    absl::StatusOr<bool> done = state_->Init(header, *std::move(values));
    if (!done.ok()) return ToGrpc(done.status());
    response->set_already_initialized(*done);
    return grpc::Status::OK;
  }

  grpc::Status Push(grpc::ServerContext* ctx,
                    grpc::ServerReader<PushRequest>* reader,
                    PushResponse* response) override {
    if (grpc::Status a = token_check_.Check(ctx); !a.ok()) return a;
    PushRequest req;
    if (!reader->Read(&req) || !req.has_header()) {
      return ToGrpc(absl::InvalidArgumentError(
          "push: the first message must be the header"));
    }
    const PushHeader header = req.header();
    absl::StatusOr<std::vector<Partition>> layout = state_->CheckPush(header);
    if (!layout.ok()) return ToGrpc(layout.status());
    const std::string what = absl::StrCat("push from rank ", header.rank());
    ChunkAssembler chunks(*layout, what, state_->TakeStaging());
    RowAssembler rows(state_->sparse_layout(), what);
    while (reader->Read(&req)) {
      absl::Status s;
      if (req.has_chunk()) {
        s = chunks.Add(req.chunk());
      } else if (req.has_rows()) {
        s = rows.Add(req.rows());
      } else {
        s = absl::InvalidArgumentError(
            absl::StrCat(what, ": a second header in the stream"));
      }
      if (!s.ok()) return ToGrpc(s);
    }
    absl::StatusOr<std::vector<std::vector<float>>> grads = chunks.Finish();
    if (!grads.ok()) return ToGrpc(grads.status());
    absl::StatusOr<PushResponse> r =
        state_->ApplyPush(header, *std::move(grads), rows.Finish());
    if (!r.ok()) return ToGrpc(r.status());
    *response = *std::move(r);
    return grpc::Status::OK;
  }

  // After the admission (see the constructor).
  grpc::Status ServePull(
      grpc::ServerContext* ctx, const PullRequest* request,
      grpc::internal::WriterInterface<PullResponse>* writer) {
    // The shard's own bound, tighter than the client's deadline, so the
    // client hears which rank is slow rather than a bare deadline.
    const absl::Time deadline =
        std::min(DeadlineOf(ctx), absl::Now() + state_->pull_timeout());
    absl::StatusOr<ShardState::Snapshot> snap =
        state_->WaitForPull(request->rank(), request->clock(), deadline);
    if (!snap.ok()) return ToGrpc(snap.status());
    PullResponse msg;
    msg.mutable_header()->set_version(snap->version);
    msg.mutable_header()->set_min_clock(snap->min_clock);
    if (!writer->Write(msg)) return grpc::Status::CANCELLED;
    TensorChunk* chunk = msg.mutable_chunk();
    constexpr int64_t kPerChunk = kMaxChunkBytes / 4;
    for (size_t i = 0; i < snap->partitions.size(); ++i) {
      const std::vector<float>& v = *snap->values[i];
      const int64_t n = v.size();
      chunk->set_partition(snap->partitions[i].id());
      for (int64_t off = 0; off < n; off += kPerChunk) {
        const int64_t len = std::min(kPerChunk, n - off);
        chunk->set_offset(off);
        chunk->set_data(reinterpret_cast<const char*>(v.data() + off), len * 4);
        if (!writer->Write(msg)) return grpc::Status::CANCELLED;
      }
    }
    return grpc::Status::OK;
  }

  // After the admission (see the constructor): PullRows' wait and checks
  // are the state's; the rows go out per table in the request's order.
  grpc::Status ServePullRows(
      grpc::ServerContext* ctx, const PullRowsRequest* request,
      grpc::internal::WriterInterface<PullRowsResponse>* writer) {
    const absl::Time deadline =
        std::min(DeadlineOf(ctx), absl::Now() + state_->pull_timeout());
    absl::StatusOr<ShardState::RowsSnapshot> snap =
        state_->PullRows(*request, deadline);
    if (!snap.ok()) return ToGrpc(snap.status());
    PullRowsResponse msg;
    msg.mutable_header()->set_version(snap->version);
    msg.mutable_header()->set_min_clock(snap->min_clock);
    if (!writer->Write(msg)) return grpc::Status::CANCELLED;
    RowChunk* chunk = msg.mutable_rows();
    for (const ShardState::RowsSnapshot::Table& t : snap->tables) {
      // A row's id (a varint of at most 10 bytes) counts too, so that a
      // chunk of one-float rows stays within the receive limit.
      const int64_t per_chunk =
          std::max<int64_t>(1, kMaxChunkBytes / (int64_t{4} * t.dim + 10));
      const int64_t n = t.ids.size();
      chunk->set_table(t.table);
      for (int64_t first = 0; first < n; first += per_chunk) {
        const int64_t len = std::min(per_chunk, n - first);
        chunk->mutable_ids()->Assign(t.ids.begin() + first,
                                     t.ids.begin() + first + len);
        chunk->set_data(
            reinterpret_cast<const char*>(t.values.data() + first * t.dim),
            len * t.dim * 4);
        if (!writer->Write(msg)) return grpc::Status::CANCELLED;
      }
    }
    return grpc::Status::OK;
  }

 private:
  template <typename Request>
  absl::StatusOr<std::vector<std::vector<float>>> Assemble(
      grpc::ServerReader<Request>* reader, Request* req,
      const std::vector<Partition>& layout, std::string what,
      std::vector<std::vector<float>> buffers = {}) {
    ChunkAssembler assembler(layout, what, std::move(buffers));
    while (reader->Read(req)) {
      if (!req->has_chunk()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": a second header in the stream"));
      }
      RETURN_IF_ERROR(assembler.Add(req->chunk()));
    }
    return assembler.Finish();
  }

  ShardState* const state_;
  const TokenCheck token_check_;
};

absl::StatusOr<std::unique_ptr<ShardServer>> ShardServer::Start(
    const ShardServerOptions& options) {
  ASSIGN_OR_RETURN(const ListenAddress where,
                   ParseListenAddress(options.listen));
  RETURN_IF_ERROR(ProbeListen(where));
  ASSIGN_OR_RETURN(TokenCheck token_check,
                   TokenCheck::FromOptions(options.security));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   ServerCredentials(options.security));
  std::unique_ptr<ShardServer> server(
      new ShardServer(options, where.host, std::move(token_check)));
  RETURN_IF_ERROR(server->Serve(options.listen, std::move(credentials)));
  return server;
}

ShardServer::ShardServer(const ShardServerOptions& options, std::string host,
                         TokenCheck token_check)
    : host_(std::move(host)),
      state_(std::make_unique<ShardState>(options.job, options.shard_index)),
      service_(
          std::make_unique<Service>(state_.get(), std::move(token_check))) {}

ShardServer::~ShardServer() { Shutdown(); }

absl::Status ShardServer::Serve(
    const std::string& listen,
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, std::move(credentials), &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // As the coordinator: without BDP probing, what a caller refused before
  // its request is read gets to send stays 64 KiB per call (with it, 48
  // refused 64 MiB Pulls kept 58 MB of the shard's memory, more each time).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // As the coordinator: no silent port sharing with a second shard.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AcceptKeepalivePings(builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", listen, ": gRPC could not start a server there"));
  }
  return absl::OkStatus();
}

std::string ShardServer::address() const {
  return absl::StrCat(host_, ":", port_);
}

absl::Status ShardServer::Configure(const JobSpec& job, int shard_index) {
  return state_->Configure(job, shard_index);
}

absl::StatusOr<std::string> ShardServer::Assign(
    const RegisterShardResponse& a) {
  const JobSpec& job = a.job();
  RETURN_IF_ERROR(state_->Configure(job, a.shard_index()));
  const CheckpointSpec& cs = job.checkpoint();
  if (cs.dir().empty()) {
    return absl::StrCat("shard ", a.shard_index(), " of ", a.num_shards(),
                        " (no checkpoints)");
  }
  const std::string dir = ShardCheckpointDir(cs.dir(), a.shard_index());
  std::string line;
  if (a.restore()) {
    // Workers may find this address before the restore is done.
    state_->ExpectRestore();
    ASSIGN_OR_RETURN(LoadedShardCheckpoint loaded,
                     LoadShardCheckpoint(job, RestoreCheckOf(a)));
    for (const std::string& r : loaded.rejected) {
      LOG(WARNING) << "skipping a bad checkpoint: " << r;
    }
    RETURN_IF_ERROR(state_->Restore(loaded.capture));
    state_->RaiseSyncClocks(a.dead_min_clock());
    line = absl::StrCat("replacement for shard ", a.shard_index(), " of ",
                        a.num_shards(), ", restored version ",
                        loaded.capture.version, " from ", loaded.path);
    if (a.dead_min_clock() > 0) {
      absl::StrAppend(&line, "; every worker was past step ",
                      a.dead_min_clock() - 1);
    }
  } else {
    ASSIGN_OR_RETURN(const int removed, RemoveShardCheckpoints(dir));
    if (removed > 0) {
      LOG(WARNING) << "removed " << removed
                   << " checkpoint files an earlier run left in " << dir;
    }
    line = absl::StrCat("shard ", a.shard_index(), " of ", a.num_shards(),
                        ", checkpoints to ", dir);
  }
  state_->EnableCheckpoints(cs.every_steps(),
                            absl::Seconds(cs.every_seconds()));
  checkpointer_ = std::make_unique<ShardCheckpointer>(
      state_.get(), dir, cs.keep() > 0 ? cs.keep() : 3, job, a.run_id(),
      a.shard_index());
  return line;
}

void ShardServer::RaiseSyncClocks(int64_t clock) {
  state_->RaiseSyncClocks(clock);
}

ShardStats ShardServer::TakeStats() { return state_->TakeStats(); }

ShardStats ShardServer::Stats() const { return state_->Stats(); }

void ShardServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  state_->Shutdown();
  checkpointer_.reset();  // after the write in progress, if any
  if (server_ != nullptr) {
    // In-flight streams get a moment to finish, then are cancelled.
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(500));
    server_->Wait();
  }
}

}  // namespace cohort
