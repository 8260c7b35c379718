#include "worker/loop/training_log.h"

#include <dirent.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<std::string> EventFiles(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (absl::StartsWith(e->d_name, "events.out.tfevents.")) {
      names.push_back(e->d_name);
    }
  }
  closedir(d);
  return names;
}

std::unique_ptr<TrainingLog> OpenOrDie(const TrainingLogOptions& o) {
  absl::StatusOr<std::unique_ptr<TrainingLog>> log = TrainingLog::Open(o);
  EXPECT_TRUE(log.ok()) << log.status();
  return log.ok() ? *std::move(log) : nullptr;
}

StepScalars At(int64_t step, double loss) {
  StepScalars s;
  s.step = step;
  s.epoch = (step - 1) / 4;
  s.loss = loss;
  s.lr = 0.1;
  s.grad_norm = step == 3 ? -1 : 2.0;
  s.samples = 64;
  s.seconds = 0.5;
  return s;
}

std::vector<std::string> Lines(const std::string& path) {
  return absl::StrSplit(*ReadFile(path), '\n', absl::SkipEmpty());
}

TEST(TrainingLog, RowsEveryNStepsAndAtClose) {
  TrainingLogOptions o;
  o.dir = TempDir("log_every");
  o.every_steps = 2;
  auto log = OpenOrDie(o);
  for (int64_t step = 1; step <= 5; ++step) log->Step(At(step, step));
  log->Close();
  const std::vector<std::string> rows = Lines(o.dir + "/train.csv");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], "step,epoch,wall_time,loss,lr,grad_norm,samples_per_s");
  // Steps 1-2, 3-4 and 5 (the rest, at close): mean losses, the last
  // step's lr and norm, samples over seconds.
  EXPECT_TRUE(absl::StartsWith(rows[1], "2,1,")) << rows[1];
  EXPECT_TRUE(absl::EndsWith(rows[1], ",1.5,0.1,2,128")) << rows[1];
  EXPECT_TRUE(absl::EndsWith(rows[2], ",3.5,0.1,2,128")) << rows[2];
  EXPECT_TRUE(absl::StartsWith(rows[3], "5,2,")) << rows[3];
  EXPECT_TRUE(absl::EndsWith(rows[3], ",5,0.1,2,128")) << rows[3];
  EXPECT_EQ(EventFiles(o.dir).size(), 1u);
}

TEST(TrainingLog, UnknownGradNormIsAnEmptyCell) {
  TrainingLogOptions o;
  o.dir = TempDir("log_norm");
  auto log = OpenOrDie(o);
  log->Step(At(3, 1.0));
  log->Close();
  EXPECT_TRUE(absl::EndsWith(Lines(o.dir + "/train.csv")[1], ",1,0.1,,128"));
}

TEST(TrainingLog, EvaluationRowsAreWrittenAtOnce) {
  TrainingLogOptions o;
  o.dir = TempDir("log_eval");
  auto log = OpenOrDie(o);
  log->Evaluated(4, 0, {{"loss", 0.5}, {"accuracy", 0.875}});
  const std::vector<std::string> rows = Lines(o.dir + "/eval.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], "step,epoch,wall_time,loss,accuracy");
  EXPECT_TRUE(absl::StartsWith(rows[1], "4,1,")) << rows[1];
  EXPECT_TRUE(absl::EndsWith(rows[1], ",0.5,0.875")) << rows[1];
}

TEST(TrainingLog, ResumedRunContinuesTheCsvAndAddsAnEventFile) {
  TrainingLogOptions o;
  o.dir = TempDir("log_resume");
  auto first = OpenOrDie(o);
  for (int64_t step = 1; step <= 6; ++step) first->Step(At(step, step));
  first->Evaluated(4, 0, {{"loss", 0.5}});
  first->Evaluated(6, 1, {{"loss", 0.25}});
  first.reset();
  o.start_step = 4;
  auto second = OpenOrDie(o);
  second->Step(At(5, 50));
  second.reset();
  const std::vector<std::string> rows = Lines(o.dir + "/train.csv");
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_TRUE(absl::StartsWith(rows[4], "4,1,")) << rows[4];
  EXPECT_TRUE(absl::StartsWith(rows[5], "5,2,")) << rows[5];
  EXPECT_TRUE(absl::StrContains(rows[5], ",50,")) << rows[5];
  EXPECT_EQ(Lines(o.dir + "/eval.csv").size(), 2u);
  EXPECT_EQ(EventFiles(o.dir).size(), 2u);
}

TEST(TrainingLog, UnwritableDirectoryIsRefusedAtOpen) {
  TrainingLogOptions o;
  o.dir = "/proc/cohort-no-such-dir";
  absl::StatusOr<std::unique_ptr<TrainingLog>> log = TrainingLog::Open(o);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(log.status().message(), "log directory"));
}

}  // namespace
}  // namespace cohort
