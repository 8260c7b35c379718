#include "worker/loop/scalar_log.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/files.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

const std::vector<std::string> kColumns = {"step", "loss"};

std::unique_ptr<ScalarLog> OpenOrDie(const std::string& path, int64_t after) {
  absl::StatusOr<std::unique_ptr<ScalarLog>> log = ScalarLog::Open(path, after);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? *std::move(log) : nullptr;
}

TEST(ScalarLog, HeaderThenRowsReachTheFileAtFlush) {
  const std::string path = TempPath("fresh.csv");
  auto log = OpenOrDie(path, 0);
  ASSERT_TRUE(log->Add(kColumns, {"1", "2.5"}).ok());
  ASSERT_TRUE(log->Add(kColumns, {"2", "2.25"}).ok());
  EXPECT_EQ(*ReadFile(path), "");
  ASSERT_TRUE(log->Flush().ok());
  EXPECT_EQ(*ReadFile(path), "step,loss\n1,2.5\n2,2.25\n");
}

TEST(ScalarLog, ResumeKeepsRowsUpToTheStepAndDropsTheRest) {
  const std::string path = TempPath("resume.csv");
  ASSERT_TRUE(
      WriteFileAtomically(path, "step,loss\n1,3\n2,2\n3,1\n4,0.5\n").ok());
  auto log = OpenOrDie(path, 2);
  EXPECT_EQ(log->kept_rows(), 2);
  EXPECT_EQ(*ReadFile(path), "step,loss\n1,3\n2,2\n");
  ASSERT_TRUE(log->Add(kColumns, {"3", "1.5"}).ok());
  log.reset();  // flushes
  EXPECT_EQ(*ReadFile(path), "step,loss\n1,3\n2,2\n3,1.5\n");
}

TEST(ScalarLog, TornLastLineIsDropped) {
  const std::string path = TempPath("torn.csv");
  ASSERT_TRUE(WriteFileAtomically(path, "step,loss\n1,3\n2,2\n3,1.2").ok());
  auto log = OpenOrDie(path, 10);
  EXPECT_EQ(log->kept_rows(), 2);
  EXPECT_EQ(*ReadFile(path), "step,loss\n1,3\n2,2\n");
}

TEST(ScalarLog, FreshRunStartsTheFileAfresh) {
  const std::string path = TempPath("again.csv");
  ASSERT_TRUE(WriteFileAtomically(path, "step,loss\n1,3\n2,2\n").ok());
  auto log = OpenOrDie(path, 0);
  ASSERT_TRUE(log->Add(kColumns, {"1", "9"}).ok());
  ASSERT_TRUE(log->Flush().ok());
  EXPECT_EQ(*ReadFile(path), "step,loss\n1,9\n");
}

TEST(ScalarLog, OtherColumnsAreReplaced) {
  const std::string path = TempPath("columns.csv");
  ASSERT_TRUE(WriteFileAtomically(path, "step,mse\n1,3\n").ok());
  auto log = OpenOrDie(path, 5);
  EXPECT_EQ(log->kept_rows(), 1);
  ASSERT_TRUE(log->Add(kColumns, {"2", "1"}).ok());
  ASSERT_TRUE(log->Flush().ok());
  EXPECT_EQ(*ReadFile(path), "step,loss\n2,1\n");
}

TEST(ScalarLog, RefusesADirectoryUnderItsName) {
  const std::string path = TempPath("dir.csv");
  ASSERT_TRUE(CheckCanWriteDir(path).ok());
  absl::StatusOr<std::unique_ptr<ScalarLog>> log = ScalarLog::Open(path, 0);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("dir.csv"), std::string::npos);
}

TEST(ScalarLog, CsvNumbers) {
  EXPECT_EQ(CsvNumber(0.1f), "0.100000001");
  EXPECT_EQ(CsvNumber(2.5), "2.5");
  EXPECT_EQ(CsvNumber(1e-12), "1e-12");
  EXPECT_EQ(CsvNumber(std::nan("")), "nan");
  EXPECT_EQ(CsvNumber(-1.0 / 0.0), "-inf");
}

}  // namespace
}  // namespace cohort
