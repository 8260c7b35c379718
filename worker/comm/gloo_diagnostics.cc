#include "worker/comm/gloo_diagnostics.h"

#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/comm/gloo_store.h"

namespace cohort {

std::string HostOf(const std::string& address) {
  size_t open = address.find('[');
  size_t close = address.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return address.substr(open + 1, close - open - 1);
}

namespace {

// The first "[host]:port" in a Gloo error message, or "".
std::string AddressIn(const std::string& what) {
  size_t open = what.find('[');
  while (open != std::string::npos) {
    size_t close = what.find("]:", open);
    if (close == std::string::npos) return "";
    size_t end = close + 2;
    while (end < what.size() &&
           isdigit(static_cast<unsigned char>(what[end]))) {
      ++end;
    }
    if (end > close + 2) return what.substr(open, end - open);
    open = what.find('[', close);
  }
  return "";
}

bool Contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

std::string StripGlooLocation(const std::string& what) {
  if (!what.empty() && what[0] == '[') {
    size_t end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

std::string PeerNames::NameIn(const std::string& what) const {
  std::string address = AddressIn(what);
  if (address.empty()) return "";
  auto it = rank_of_.find(address);
  if (it != rank_of_.end()) return absl::StrCat("rank ", it->second);
  // Gloo sometimes names a dead peer by a port it never connected with; the
  // host still tells, and is unique with one worker per node.
  std::set<int> same_host;
  for (const auto& [known, rank] : rank_of_) {
    if (HostOf(known) == HostOf(address)) same_host.insert(rank);
  }
  if (same_host.empty()) return address;
  if (same_host.size() == 1) return absl::StrCat("rank ", *same_host.begin());
  return absl::StrCat("one of ranks ", absl::StrJoin(same_host, ", "), " at ",
                      HostOf(address));
}

int PeerNames::RanksOnHost(const std::string& host) const {
  std::set<int> ranks;
  for (const auto& [known, rank] : rank_of_) {
    if (HostOf(known) == host) ranks.insert(rank);
  }
  return static_cast<int>(ranks.size());
}

absl::Status DescribeCollectiveFailure(const std::string& what,
                                       const CollectiveInfo& info,
                                       const PeerNames& peers) {
  std::string head =
      absl::StrCat("all-reduce of ", info.count, " floats (", info.algorithm,
                   ") failed on rank ", info.rank, " of ", info.size, ": ");
  std::string peer = peers.NameIn(what);
  bool timed_out = Contains(what, "Timed out") || Contains(what, "timeout");
  if (!timed_out) {
    if (peer.empty()) return absl::UnavailableError(absl::StrCat(head, what));
    return absl::UnavailableError(
        absl::StrCat(head, "lost the connection to ", peer,
                     " (it failed or exited): ", what));
  }
  bool ambiguous = peer.empty() || peer.rfind("one of", 0) == 0;
  if (ambiguous && info.ring) {
    bool sending = Contains(what, "send") || Contains(what, "Write");
    int neighbour = (info.rank + (sending ? 1 : info.size - 1)) % info.size;
    peer = absl::StrCat("rank ", neighbour);
  }
  std::string waiting = peer.empty()
                            ? std::string("a peer that stalled or died")
                            : absl::StrCat(peer,
                                           " (it, or a rank it waits for, "
                                           "stalled or died)");
  return absl::DeadlineExceededError(absl::StrCat(
      head, "no progress within ", absl::FormatDuration(info.timeout),
      " waiting for ", waiting));
}

absl::Status DescribeRendezvousFailure(gloo::rendezvous::Store& store,
                                       const std::exception& e, int rank,
                                       int size) {
  std::string head =
      absl::StrCat("Gloo rendezvous of rank ", rank, " of ", size, " failed: ");
  auto* kv_store = dynamic_cast<KvGlooStore*>(&store);
  if (kv_store != nullptr && !kv_store->last_error().ok()) {
    absl::Status cause = kv_store->last_error();
    return absl::Status(cause.code(), absl::StrCat(head, cause.message()));
  }
  std::string what = StripGlooLocation(e.what());
  bool timed_out = Contains(what, "imeout") || Contains(what, "Timed out");
  return absl::Status(timed_out ? absl::StatusCode::kDeadlineExceeded
                                : absl::StatusCode::kUnavailable,
                      absl::StrCat(head, what));
}

}  // namespace cohort
