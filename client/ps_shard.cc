#include "client/ps_shard.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/keepalive.h"
#include "client/ps_limits.h"

namespace cohort {
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

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Connect(
    int index, const std::string& address, const PsClientOptions* options) {
  std::unique_ptr<PsShard> s(new PsShard(index, options));
  absl::Status st = s->Reconnect(address);
  if (!st.ok()) return st;
  return s;
}

absl::Status PsShard::Reconnect(const std::string& address) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      CreateChannel(address, options_->security, ShardChannelArgs(index_));
  if (!channel.ok()) return channel.status();
  std::shared_ptr<ParameterServer::Stub> stub =
      ParameterServer::NewStub(*std::move(channel));
  absl::MutexLock lock(&mu_);
  address_ = address;
  stub_ = std::move(stub);
  return absl::OkStatus();
}

std::string PsShard::address() const {
  absl::MutexLock lock(&mu_);
  return address_;
}

std::shared_ptr<ParameterServer::Stub> PsShard::stub() const {
  absl::MutexLock lock(&mu_);
  return stub_;
}

void PsShard::Readdress() {
  if (!options_->shard_address) return;
  absl::StatusOr<std::string> now = options_->shard_address(index_);
  const std::string before = address();
  if (!now.ok() || now->empty() || *now == before) return;
  if (Reconnect(*now).ok()) {
    LOG(INFO) << "parameter-server shard " << index_ << " moved from " << before
              << " to " << *now;
  }
}

absl::Status PsShard::Error(absl::string_view op, absl::StatusCode code,
                            absl::string_view message) const {
  const std::string hint = code == absl::StatusCode::kUnavailable
                               ? TlsHint(options_->security, message)
                               : "";
  return absl::Status(
      code, absl::StrCat(op, " shard ", index_, " at ", address(), ": ",
                         absl::StatusCodeToString(code), ": ", message, hint));
}

absl::Status PsShard::Error(absl::string_view op, const grpc::Status& s) const {
  return Error(op, static_cast<absl::StatusCode>(s.error_code()),
               s.error_message());
}

}  // namespace cohort
