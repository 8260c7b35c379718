#include "worker/comm/connect_abort.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/kv_client.h"
#include "gloo/common/error.h"
#include "gtest/gtest.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_store.h"

namespace cohort {
namespace {

// Far beyond the test's own timeout: a connect that ends at all ends
// because it was aborted.
constexpr absl::Duration kGlooTimeout = absl::Seconds(300);

// A peer that publishes its pair addresses (Gloo's key "1" for rank 1) and
// then never dials in: it left to rejoin, or stalled. Its reads after that
// block until released, then fail; the ones before (Gloo's exchange of
// hosts) go through.
class StalledPeerStore : public gloo::rendezvous::Store {
 public:
  StalledPeerStore(KvGlooStore* store, std::string addresses_key,
                   absl::Notification* released)
      : store_(store),
        addresses_key_(std::move(addresses_key)),
        released_(released) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, data);
    if (key == addresses_key_) published_ = true;
  }
  std::vector<char> get(const std::string& key) override {
    Stall();
    return store_->get(key);
  }
  void wait(const std::vector<std::string>& keys) override {
    Stall();
    store_->wait(keys);
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Stall();
    store_->wait(keys, timeout);
  }

 private:
  void Stall() {
    if (!published_) return;
    released_->WaitForNotification();
    throw gloo::IoException("the stalled peer was released");
  }

  KvGlooStore* const store_;
  const std::string addresses_key_;
  absl::Notification* const released_;
  bool published_ = false;  // only the peer's own thread calls the store
};

GlooOptions Options(PortRange ports) {
  GlooOptions o;
  o.timeout = kGlooTimeout;
  o.lanes = 1;
  o.ports = ports;
  return o;
}

// Rank 0 connects to a rank 1 that published its addresses and stalled;
// the generation then ends (the KV fails, as the coordinator's does, and
// the verdict aborts the connect). Returns rank 0's result and how long
// its connect took after the abort.
absl::Status ConnectToStalledPeer(PortRange rank0_ports, PortRange rank1_ports,
                                  absl::Duration* after_abort) {
  InMemoryKv kv;
  KvGlooStore store0(&kv, "", kGlooTimeout);
  KvGlooStore store1(&kv, "", kGlooTimeout);
  absl::Notification released;
  StalledPeerStore stalled(&store1, "1", &released);
  std::thread peer([&] {
    CreateGlooCommunicator(stalled, 1, 2, Options(rank1_ports)).IgnoreError();
  });
  ConnectAbort abort;
  GlooOptions options = Options(rank0_ports);
  options.abort = &abort;
  absl::Status result;
  absl::Time returned;
  std::thread rank0([&] {
    result = CreateGlooCommunicator(store0, 0, 2, options).status();
    returned = absl::Now();
  });
  // Both ranks' addresses published: rank 0 is connecting to rank 1 now.
  EXPECT_TRUE(kv.Wait({"0", "1"}, absl::Seconds(30)).ok());
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time aborted = absl::Now();
  kv.InjectError(absl::AbortedError("generation 1 is over"));
  abort.Abort(absl::AbortedError("generation 1 is over (the verdict)"));
  rank0.join();
  released.Notify();
  peer.join();
  *after_abort = returned - aborted;
  return result;
}

// Which side of a pair listens and which dials follows the two ports as
// Gloo compares them: in network byte order, so by their low bytes first.
// These two ranges differ in the low byte (0x00-0x0f against 0xf0-0xff), so
// in the two orders rank 0 takes each side once.
TEST(ConnectAbort, EndsAConnectToAPeerThatNeverDials) {
  const PortRange low{0x7a00, 0x7a0f};
  const PortRange high{0x7af0, 0x7aff};
  for (const auto& [mine, theirs] : {std::pair{low, high}, {high, low}}) {
    absl::Duration took;
    const absl::Status s = ConnectToStalledPeer(mine, theirs, &took);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "the verdict")) << s;
    // Against a Gloo timeout of 300 s: the abort, not the timeout, ended it.
    EXPECT_LT(took, absl::Seconds(20)) << "rank 0 ports " << mine.lo;
  }
}

TEST(ConnectAbort, AbortedBeforeTheConnectRefusesIt) {
  InMemoryKv kv;
  KvGlooStore store(&kv, "", kGlooTimeout);
  ConnectAbort abort;
  abort.Abort(absl::AbortedError("generation 3 is over"));
  GlooOptions options = Options(PortRange());
  options.abort = &abort;
  const absl::Status s = CreateGlooCommunicator(store, 0, 2, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(s.message(), "generation 3")) << s;
}

TEST(ConnectAbort, ListensOutsideAScopeAsBefore) {
  ConnectAbort abort;
  abort.Abort(absl::AbortedError("over"));
  // No scope on this thread: the aborted object refuses nothing here.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(listen(fd, 1), 0);
  close(fd);
  // Inside its scope, a listen after the abort is refused.
  ConnectAbort::Scope scope(&abort);
  const int fd2 = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd2, 0);
  EXPECT_EQ(listen(fd2, 1), -1);
  EXPECT_EQ(errno, ECONNABORTED);
  close(fd2);
}

}  // namespace
}  // namespace cohort
