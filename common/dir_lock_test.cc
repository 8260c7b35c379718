#include "common/dir_lock.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

// Whether a child process (a lock belongs to a process's open file, so
// another descriptor in this process would share nothing) can take it.
bool ChildCanLock(const std::string& dir) {
  const pid_t pid = fork();
  if (pid == 0) {
    auto lock = DirectoryLock::Acquire(dir, "child");
    _exit(lock.ok() ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(DirectoryLock, OneHolderAtATimeNamedInTheRefusal) {
  const std::string dir = TempDir();
  {
    auto first = DirectoryLock::Acquire(dir, "pid 1, coordinator on h:1");
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_FALSE(ChildCanLock(dir));
    (*first)->SetHolder("pid 1, coordinator on h:29400");
    // flock locks belong to the open file: a second open in this process
    // is refused the same way.
    auto second = DirectoryLock::Acquire(dir, "pid 2");
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(second.status().message().find("coordinator on h:29400"),
              std::string::npos)
        << second.status();
  }
  EXPECT_TRUE(ChildCanLock(dir));  // released with the object
}

TEST(DirectoryLock, AMissingDirectoryIsAnError) {
  auto lock = DirectoryLock::Acquire(TempDir() + "/no/such/dir", "x");
  EXPECT_FALSE(lock.ok());
}

// The holder is written into the lock file: a symbolic link there must not
// lead it into another file, nor a FIFO make it wait.
TEST(DirectoryLock, ALockFileThatIsNotARegularFileIsRefused) {
  const std::string dir = TempDir() + "/odd_lock";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string target = dir + "/precious";
  std::ofstream(target) << "keep me";
  ASSERT_EQ(symlink(target.c_str(), (dir + "/.lock").c_str()), 0);
  auto lock = DirectoryLock::Acquire(dir, "pid 1");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(lock.status().message().find("is a symbolic link"),
            std::string::npos)
      << lock.status();
  std::stringstream kept;
  kept << std::ifstream(target).rdbuf();
  EXPECT_EQ(kept.str(), "keep me");
  ASSERT_EQ(unlink((dir + "/.lock").c_str()), 0);
  ASSERT_EQ(mkfifo((dir + "/.lock").c_str(), 0600), 0);
  lock = DirectoryLock::Acquire(dir, "pid 1");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(lock.status().message().find("is not a regular file"),
            std::string::npos)
      << lock.status();
}

}  // namespace
}  // namespace cohort
