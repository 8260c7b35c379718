// Real processes over loopback: a peer killed with SIGKILL must make the
// others fail with a clear error within the timeout (not hang, and not die
// of SIGPIPE). Kept apart from the threaded tests because it forks, which is
// only safe while the test process has no other threads.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gloo/rendezvous/file_store.h"
#include "gtest/gtest.h"
#include "worker/comm/communicator.h"

namespace cohort {
namespace {

constexpr int kRanks = 3;
constexpr int kVictim = 2;

std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "/comm_process_XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  char* dir = mkdtemp(buffer.data());
  return dir == nullptr ? "" : std::string(dir);
}

// Body of one child process; reports "<seconds> <status>" in a file.
[[noreturn]] void RunRank(const std::string& dir, int rank) {
  gloo::rendezvous::FileStore store(dir + "/store");
  GlooOptions options;
  options.timeout = absl::Seconds(2);
  auto comm = CreateGlooCommunicator(store, rank, kRanks, options);
  std::ofstream out(dir + "/result_" + std::to_string(rank));
  if (!comm.ok()) {
    out << "-1 " << comm.status() << std::endl;
    _exit(1);
  }
  std::vector<float> data(1 << 16, 1.0f);
  absl::Status first = (*comm)->AllReduceSum(data.data(), data.size());
  if (!first.ok()) {
    out << "-1 " << first << std::endl;
    _exit(1);
  }
  if (rank == kVictim) raise(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  absl::Status second = (*comm)->AllReduceSum(data.data(), data.size());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  out << seconds << " " << second << std::endl;
  out.close();
  _exit(0);
}

TEST(GlooCommunicatorProcess, KilledPeerFailsTheOthersWithinTheTimeout) {
  std::string dir = MakeTempDir();
  ASSERT_FALSE(dir.empty());
  ASSERT_EQ(system(("mkdir -p " + dir + "/store").c_str()), 0);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kRanks; ++rank) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) RunRank(dir, rank);
    pids.push_back(pid);
  }
  // Reap with a deadline so that a hang fails the test instead of Bazel.
  std::vector<int> statuses(kRanks, -1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int done = 0; done < kRanks;) {
    for (int rank = 0; rank < kRanks; ++rank) {
      if (statuses[rank] != -1) continue;
      int status;
      if (waitpid(pids[rank], &status, WNOHANG) == pids[rank]) {
        statuses[rank] = status;
        ++done;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int rank = 0; rank < kRanks; ++rank) {
        if (statuses[rank] == -1) kill(pids[rank], SIGKILL);
      }
      FAIL() << "ranks still running after 30 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(WIFSIGNALED(statuses[kVictim]) &&
              WTERMSIG(statuses[kVictim]) == SIGKILL);
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank == kVictim) continue;
    ASSERT_TRUE(WIFEXITED(statuses[rank]))
        << "rank " << rank << " died of signal " << WTERMSIG(statuses[rank]);
    EXPECT_EQ(WEXITSTATUS(statuses[rank]), 0);
    std::ifstream in(dir + "/result_" + std::to_string(rank));
    double seconds = -1;
    std::string message;
    in >> seconds;
    std::getline(in, message);
    EXPECT_GE(seconds, 0) << message;
    EXPECT_LT(seconds, 3.0) << message;
    // Gloo sometimes names a dead peer by a port we never saw; then only
    // the candidates on its host can be named.
    EXPECT_TRUE(message.find("rank 2 ") != std::string::npos ||
                message.find(", 2 at 127.0.0.1") != std::string::npos)
        << message;
    std::cerr << "rank " << rank << " after " << seconds << " s:" << message
              << "\n";
  }
}

}  // namespace
}  // namespace cohort
