#include "cli/output_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;

// A fresh directory under TEST_TMPDIR.
std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/output_paths_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(OutputPaths, AnInputIsRefusedByIdentityNotByName) {
  const std::string dir = FreshDir("identity");
  Touch(dir + "/x.npy");
  CommandInputs in;
  in.files.emplace_back("the --input file", dir + "/x.npy");
  absl::Status s = CheckOutputFlag("--out", dir + "/./x.npy", in);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--out: " + dir +
                             "/./x.npy is the --input file, which this "
                             "command reads; write the output elsewhere");
  ASSERT_EQ(link((dir + "/x.npy").c_str(), (dir + "/hard.npy").c_str()), 0);
  EXPECT_FALSE(CheckOutputFlag("--out", dir + "/hard.npy", in).ok());
  EXPECT_TRUE(CheckOutputFlag("--out", dir + "/y.npy", in).ok());
}

TEST(OutputPaths, ACheckpointNameInTheCheckpointDirectoryIsRefused) {
  const std::string dir = FreshDir("ckpt");
  Touch(dir + "/ckpt-000000000020.cohort");
  CommandInputs in;
  in.AddCheckpoint(dir);
  absl::Status s =
      CheckOutputFlag("--out", dir + "/ckpt-000000000099.cohort", in);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is named like a checkpoint in " + dir),
            std::string::npos)
      << s;
  EXPECT_TRUE(CheckOutputFlag("--out", dir + "/model.onnx", in).ok());

  CommandInputs file;
  file.AddCheckpoint(dir + "/ckpt-000000000020.cohort");
  s = CheckOutputFlag("--out", dir + "/ckpt-000000000020.cohort", file);
  EXPECT_NE(s.message().find("is the --checkpoint file"), std::string::npos)
      << s;
  EXPECT_FALSE(
      CheckOutputFlag("--out", dir + "/ckpt-000000000021.cohort", file).ok());
}

TEST(OutputPaths, TheDataSetsFilesAreInputs) {
  const std::string dir = FreshDir("data");
  Touch(dir + "/test.csv");
  Touch(dir + "/train_x.npz");
  DatasetSpec csv;
  csv.set_kind(DatasetSpec::CSV);
  csv.mutable_csv()->add_test("test.csv");
  CommandInputs in;
  in.AddDataSet(csv, dir);
  absl::Status s = CheckOutputFlag("--confusion", dir + "/test.csv", in);
  EXPECT_NE(s.message().find("is a file of the data set (data.csv.test)"),
            std::string::npos)
      << s;
  DatasetSpec npz;
  npz.set_kind(DatasetSpec::NUMPY);
  npz.set_dir(dir);
  npz.mutable_numpy()->add_train_x("train_x.npz:images");
  CommandInputs archive;
  archive.AddDataSet(npz, "");
  EXPECT_FALSE(CheckOutputFlag("--out", dir + "/train_x.npz", archive).ok());
  DatasetSpec images;
  images.set_kind(DatasetSpec::IMAGE_FOLDER);
  CommandInputs folder;
  folder.AddDataSet(images, dir);
  EXPECT_FALSE(CheckOutputFlag("--out", dir + "/test.csv", folder).ok());
  EXPECT_TRUE(CheckOutputFlag("--out", dir + "/new.csv", folder).ok());
}

TEST(OutputPaths, WhatIsNotARegularFileIsRefused) {
  const std::string dir = FreshDir("kinds");
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  absl::Status s = CheckOutputFlag("--report", dir + "/fifo", {});
  EXPECT_EQ(s.message(), "--report: cannot write " + dir +
                             "/fifo: it is a FIFO, not a regular file, and "
                             "cohort replaces only regular files");
}

TEST(OutputPaths, TwoOutputsInOneFileAreRefused) {
  const std::string dir = FreshDir("distinct");
  absl::Status s = CheckDistinctOutputs({{"--report", dir + "/r.json"},
                                         {"--timeline", ""},
                                         {"--export", dir + "/./r.json"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--export: " + dir +
                             "/./r.json is also the file of --report; give "
                             "each output its own file");
  EXPECT_TRUE(CheckDistinctOutputs({{"--report", dir + "/r.json"},
                                    {"--timeline", dir + "/t.json"}})
                  .ok());
}

}  // namespace
}  // namespace cohort
