// One parameter-server shard as the client reaches it: where it serves, its
// stub, the retry rule every RPC to it follows, and errors that name it.
//
// Every RPC has a deadline (rpc_timeout); UNAVAILABLE (a shard restarting, a
// dropped connection) is retried with exponential backoff (100 ms doubling
// to 2 s) for up to rpc_timeout plus the restart window, each attempt with
// its own deadline, the shard's address re-read between attempts (a
// replacement shard may serve elsewhere). Other errors fail at once.
//
// Ownership: PsClient owns its shards; a shard borrows the client's options.
// Thread safety: thread-safe. A push on the client's shard thread and pulls
// of rows from several replica threads may use one shard at once; a new
// address replaces the stub under a lock, and a call keeps the stub it
// started with.
#ifndef COHORT_CLIENT_PS_SHARD_H_
#define COHORT_CLIENT_PS_SHARD_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "common/logging.h"
#include "common/security.h"
#include "proto/ps.grpc.pb.h"

namespace cohort {

class PsShard {
 public:
  // INVALID_ARGUMENT for an unusable address or security setting.
  static absl::StatusOr<std::unique_ptr<PsShard>> Connect(
      int index, const std::string& address, const PsClientOptions* options);

  int index() const { return index_; }
  std::string address() const;
  std::shared_ptr<ParameterServer::Stub> stub() const;

  // Runs `attempt(deadline)` until it succeeds, fails with anything but
  // UNAVAILABLE (or a failed TLS handshake, which would fail again) or the
  // retry window (rpc_timeout + restart_window from now) closes. Each
  // attempt's deadline is rpc_timeout + `wait` + `grace` from its start,
  // but no later than the window's end + `grace`.
  template <typename Attempt>
  grpc::Status Retry(absl::Duration wait, absl::Duration grace,
                     const Attempt& attempt);

  // "OP shard I at HOST:PORT: CODE: message", with a TLS hint where one
  // helps.
  absl::Status Error(absl::string_view op, absl::StatusCode code,
                     absl::string_view message) const;
  absl::Status Error(absl::string_view op, const grpc::Status& s) const;

 private:
  PsShard(int index, const PsClientOptions* options)
      : index_(index), options_(options) {}
  absl::Status Reconnect(const std::string& address);
  // Points the shard at its current address, if the coordinator knows
  // another.
  void Readdress();

  const int index_;
  const PsClientOptions* const options_;
  mutable absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ParameterServer::Stub> stub_ ABSL_GUARDED_BY(mu_);
};

template <typename Attempt>
grpc::Status PsShard::Retry(absl::Duration wait, absl::Duration grace,
                            const Attempt& attempt) {
  // Retries of UNAVAILABLE back off from the first, doubling up to the
  // maximum.
  constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
  constexpr absl::Duration kMaxBackoff = absl::Seconds(2);
  const absl::Time start = absl::Now();
  const absl::Time retry_until =
      start + options_->rpc_timeout + options_->restart_window;
  absl::Duration backoff = kFirstBackoff;
  int failures = 0;
  while (true) {
    const absl::Time deadline =
        std::min(absl::Now() + options_->rpc_timeout + wait, retry_until) +
        grace;
    grpc::Status st = attempt(deadline);
    const bool retry = st.error_code() == grpc::StatusCode::UNAVAILABLE &&
                       !IsTlsHandshakeFailure(st.error_message());
    if (!retry || absl::Now() + backoff >= retry_until) {
      if (st.ok() && failures > 0) {
        LOG(WARNING) << "parameter-server shard " << index_ << " at "
                     << address() << " answered again after "
                     << absl::FormatDuration(absl::Now() - start) << " and "
                     << failures << " failed attempts";
      }
      return st;
    }
    ++failures;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
    Readdress();
  }
}

}  // namespace cohort

#endif  // COHORT_CLIENT_PS_SHARD_H_
