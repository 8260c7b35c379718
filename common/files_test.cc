#include "common/files.h"

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

}  // namespace
}  // namespace cohort
