// The job token's file and its check: ReadToken and TokenMatches. The TLS
// files and the servers that use both are tested in server/security_test.cc,
// which starts a coordinator and shards.
#include "common/security.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TmpDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

std::string WriteTmp(const std::string& name, const std::string& contents) {
  const std::string path = absl::StrCat(TmpDir(), "/", name);
  std::ofstream(path) << contents;
  return path;
}

TEST(ReadTokenTest, TrimsWhitespace) {
  const std::string path = WriteTmp("t1", "  s3cret-token\n\n");
  absl::StatusOr<std::string> t = ReadToken(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, "s3cret-token");
}

TEST(ReadTokenTest, EmptyMissingAndUnprintableFailNamingThePath) {
  for (const char* contents : {"", " \n\t\n"}) {
    const std::string path = WriteTmp("empty", contents);
    absl::StatusOr<std::string> t = ReadToken(path);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(path));
    EXPECT_THAT(t.status().message(), HasSubstr("empty"));
  }
  const std::string missing = absl::StrCat(TmpDir(), "/no/such/token");
  absl::StatusOr<std::string> t = ReadToken(missing);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr(missing));

  const std::string path = WriteTmp("binary", "abc\x01secretpart");
  t = ReadToken(path);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr(path));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("secretpart")));
}

TEST(TokenMatchesTest, OnlyTheExactBearerValue) {
  EXPECT_TRUE(TokenMatches("Bearer abc123", "abc123"));
  EXPECT_FALSE(TokenMatches("Bearer abc124", "abc123"));
  EXPECT_FALSE(TokenMatches("Bearer abc12", "abc123"));    // a prefix
  EXPECT_FALSE(TokenMatches("Bearer abc1234", "abc123"));  // longer
  EXPECT_FALSE(TokenMatches("abc123", "abc123"));          // no scheme
  EXPECT_FALSE(TokenMatches("bearer abc123", "abc123"));
  EXPECT_FALSE(TokenMatches("", "abc123"));
  EXPECT_FALSE(TokenMatches("Bearer ", ""));  // no token: nothing matches
  // The same bytes at the end: a difference anywhere counts.
  EXPECT_FALSE(TokenMatches("Xearer abc123", "abc123"));
}

}  // namespace
}  // namespace cohort
