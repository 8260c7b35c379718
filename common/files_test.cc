#include "common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

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

// What is not a short regular file is refused before a byte is read:
// /dev/zero would never end, a FIFO without a writer would block forever.
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
            "job spec " + fifo + " is a FIFO, not a regular file");
  r = ReadRegularFile(TempPath(""), 100, "job spec");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace cohort
