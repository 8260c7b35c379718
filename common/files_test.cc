#include "common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(Files, WriteThenReadRoundTrips) {
  const std::string path = TempPath("roundtrip.bin");
  const std::string data("a\0b\nc", 5);
  ASSERT_TRUE(WriteFileAtomically(path, data).ok());
  absl::StatusOr<std::string> back = ReadFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, data);
  ASSERT_TRUE(WriteFileAtomically(path, "new").ok());
  EXPECT_EQ(*ReadFile(path), "new");
}

TEST(Files, MissingFileIsNotFoundAndNamesThePath) {
  absl::StatusOr<std::string> r = ReadFile(TempPath("does-not-exist"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("does-not-exist"), std::string::npos);
}

TEST(Files, UnwritableDirectoryFailsAndLeavesNothing) {
  absl::Status s = WriteFileAtomically("/nonexistent-dir/x.json", "{}");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent-dir"), std::string::npos);
}

TEST(Files, ReadRegularFileReadsUpToItsLimit) {
  const std::string path = TempPath("limit.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "0123456789").ok());
  EXPECT_EQ(*ReadRegularFile(path, 10, "job spec"), "0123456789");
  absl::StatusOr<std::string> r = ReadRegularFile(path, 9, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "job spec " + path +
                " is larger than 9 bytes; it should be a short text file");
  r = ReadRegularFile(TempPath("missing.txt"), 10, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "cannot open job spec " +
                                      TempPath("missing.txt") +
                                      ": No such file or directory");
}

// What is not a short regular file or a pipe is refused before a byte is
// read: /dev/zero would never end. A FIFO without a writer would block
// forever, or read as an empty spec: refused at once.
TEST(Files, ReadRegularFileRefusesDevicesFifosAndDirectories) {
  absl::StatusOr<std::string> r =
      ReadRegularFile("/dev/zero", int64_t{16} << 20, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "job spec /dev/zero is a character device, not a regular file");
  const std::string fifo = TempPath("spec.fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  r = ReadRegularFile(fifo, 100, "job spec");
  EXPECT_EQ(r.status().message(),
            "job spec " + fifo + " is a FIFO that nothing writes to");
  r = ReadRegularFile(TempPath(""), 100, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos);
}

// What `--job=<(command)` hands over: a pipe with a writer.
TEST(Files, ReadRegularFileReadsAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    usleep(100000);  // the reader waits for it
    const char text[] = "name: \"piped\"\n";
    ASSERT_EQ(write(fds[1], text, sizeof(text) - 1),
              static_cast<ssize_t>(sizeof(text) - 1));
    close(fds[1]);
  });
  absl::StatusOr<std::string> r = ReadRegularFile(
      "/proc/self/fd/" + std::to_string(fds[0]), 100, "job spec");
  writer.join();
  close(fds[0]);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "name: \"piped\"\n");
  // And a pipe longer than the limit is refused like a file.
  ASSERT_EQ(pipe(fds), 0);
  std::thread big([&] {
    const std::string bytes(200, 'x');
    EXPECT_GT(write(fds[1], bytes.data(), bytes.size()), 100);
    close(fds[1]);
  });
  r = ReadRegularFile("/proc/self/fd/" + std::to_string(fds[0]), 100,
                      "job spec");
  big.join();
  close(fds[0]);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort
