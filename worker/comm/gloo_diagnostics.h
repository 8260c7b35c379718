// Turns Gloo's exceptions into the one-sentence statuses cohort reports:
// which collective failed on which rank, why, and which peer is to blame
// when that can be told. Internal to the Gloo communicator.
//
// PeerNames is filled once while connecting and then only read, so it may be
// shared by threads; the functions are pure.
#ifndef COHORT_WORKER_COMM_GLOO_DIAGNOSTICS_H_
#define COHORT_WORKER_COMM_GLOO_DIAGNOSTICS_H_

#include <exception>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"

namespace cohort {

// Gloo prefixes messages with "[file:line] ", which means nothing to users.
std::string StripGlooLocation(const std::string& what);

// The IP part of a Gloo address string ("[10.0.0.5]:41234" -> "10.0.0.5"),
// "" when it has none.
std::string HostOf(const std::string& address);

// The socket addresses ("[10.0.0.5]:41234") by which Gloo's messages may
// name each peer rank.
class PeerNames {
 public:
  void Add(const std::string& address, int rank) { rank_of_[address] = rank; }
  // "rank k" for the address in `what`; when Gloo names a port we never saw,
  // the peers on that host ("rank k" if only one, else "one of ranks ...");
  // "" when `what` names no address.
  std::string NameIn(const std::string& what) const;
  // How many distinct ranks have an address on `host`.
  int RanksOnHost(const std::string& host) const;

 private:
  std::map<std::string, int> rank_of_;
};

struct CollectiveInfo {
  std::string algorithm;
  bool ring = false;  // receives only from rank-1 and sends only to rank+1
  int rank = 0;
  int size = 1;
  int64_t count = 0;
  absl::Duration timeout;
};

// DEADLINE_EXCEEDED for timeouts, UNAVAILABLE for lost connections and other
// I/O errors; the message names the peer when it can.
absl::Status DescribeCollectiveFailure(const std::string& what,
                                       const CollectiveInfo& info,
                                       const PeerNames& peers);

// The store's own status when it is a KvGlooStore that kept one (it names the
// ranks that never joined); else the Gloo message.
absl::Status DescribeRendezvousFailure(gloo::rendezvous::Store& store,
                                       const std::exception& e, int rank,
                                       int size);

}  // namespace cohort

#endif  // COHORT_WORKER_COMM_GLOO_DIAGNOSTICS_H_
