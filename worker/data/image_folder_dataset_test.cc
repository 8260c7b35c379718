#include "worker/data/image_folder_dataset.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/image_files.h"
#include "worker/data/loader.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

DatasetSpec Spec(int classes, float val_fraction = 0) {
  DatasetSpec d;
  d.set_kind(DatasetSpec::IMAGE_FOLDER);
  d.mutable_image_folder()->set_classes(classes);
  d.mutable_image_folder()->set_image_size(16);
  d.mutable_image_folder()->set_val_fraction(val_fraction);
  return d;
}

std::string Folder(int classes, int train, int val) {
  const std::string dir = MakeTempDir();
  FolderOptions o;
  o.classes = classes;
  o.train_per_class = train;
  o.val_per_class = val;
  WriteImageFolder(dir, o);
  return dir;
}

absl::Status ErrorOf(const DatasetSpec& spec, const std::string& dir) {
  return LoadDataset(spec, dir, 1).status();
}

TEST(ImageFolder, IndexesSortedClassesAndFiles) {
  const std::string dir = Folder(3, 5, 2);
  absl::StatusOr<DataSplits> s = LoadDataset(Spec(3), dir, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->train->size(), 15);
  ASSERT_EQ(s->test->size(), 6);
  EXPECT_EQ(s->train->num_classes(), 3);
  EXPECT_EQ(s->train->sample_shape(), (Shape{3, 16, 16}));
  const auto& files = static_cast<const ImageFolderDataset&>(*s->train).files();
  EXPECT_EQ(files[0].path, dir + "/train/class_00/00000.jpg");
  EXPECT_EQ(files[2].path, dir + "/train/class_00/00002.png");
  EXPECT_EQ(files[5].label, 1);
  EXPECT_EQ(files[14].label, 2);
  // Val may hold a subset of the classes; they keep train's indices.
  std::filesystem::remove_all(dir + "/val/class_00");
  s = LoadDataset(Spec(3), dir, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->test->size(), 4);
  std::vector<float> x(3 * 16 * 16);
  EXPECT_EQ(LabelOf(*s->test, 0, x.data()), 1);
}

TEST(ImageFolder, HoldsOutValFractionWithoutValFolder) {
  const std::string dir = Folder(2, 10, 0);
  EXPECT_EQ(ErrorOf(Spec(2), dir).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorOf(Spec(2), dir).message(),
              HasSubstr(dir + "/val: no such folder; add one or set "
                              "data.image_folder.val_fraction"));
  absl::StatusOr<DataSplits> s = LoadDataset(Spec(2, 0.2f), dir, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->train->size(), 16);
  EXPECT_EQ(s->test->size(), 4);
}

TEST(ImageFolder, LayoutErrorsNameTheFolder) {
  const std::string dir = Folder(3, 2, 1);
  EXPECT_EQ(ErrorOf(Spec(3), dir + "/nope").code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorOf(Spec(4), dir).message(),
              HasSubstr(dir + "/train has 3 class folders (class_00, "
                              "class_01, class_02) but "
                              "data.image_folder.classes is 4"));
  std::filesystem::create_directories(dir + "/val/zebra");
  EXPECT_THAT(ErrorOf(Spec(3), dir).message(),
              HasSubstr(dir + "/val/zebra: a class folder the training "
                              "folder does not have"));
  std::filesystem::remove_all(dir + "/val/zebra");
  std::filesystem::create_directories(dir + "/train/class_03");
  WriteBytes(dir + "/train/class_03/notes.txt", "not an image");
  EXPECT_EQ(ErrorOf(Spec(4), dir).message(),
            dir +
                "/train/class_03: an empty class folder (no .jpg, .jpeg "
                "or .png file)");
  const std::string empty = MakeTempDir();
  std::filesystem::create_directories(empty + "/train");
  EXPECT_THAT(ErrorOf(Spec(3), empty).message(),
              HasSubstr(empty + "/train holds no class folders"));
}

// A line break in a folder or file name stays inside the one line of the
// message (quoted, escaped), so a name cannot forge a line of output.
TEST(ImageFolder, NamesWithLineBreaksStayInOneLine) {
  const std::string dir = Folder(2, 4, 1);
  const std::string forged = "zebra\ncohort train: finished";
  std::filesystem::create_directories(dir + "/val/" + forged);
  const std::string m(ErrorOf(Spec(2), dir).message());
  EXPECT_EQ(m, "\"" + dir +
                   "/val/zebra\\ncohort train: finished\": a class folder "
                   "the training folder does not have");
  EXPECT_EQ(m.find('\n'), std::string::npos);
  std::filesystem::remove_all(dir + "/val/" + forged);
  const std::string bad = dir + "/train/class_01/x\ncohort train: done.jpg";
  WriteBytes(bad, "GIF89a....");
  absl::StatusOr<DataSplits> splits = LoadDataset(Spec(2), dir, 1);
  ASSERT_TRUE(splits.ok()) << splits.status();
  const auto& files =
      static_cast<const ImageFolderDataset&>(*splits->train).files();
  int64_t index = 0;
  while (files[index].path != bad) ++index;
  std::vector<float> x(3 * 16 * 16);
  SampleOut out;
  out.features = x.data();
  const absl::Status st = splits->train->Read(index, 1, out);
  EXPECT_EQ(st.message(), "\"" + dir +
                              "/train/class_01/x\\ncohort train: done.jpg\": "
                              "not a JPEG or PNG file (a GIF image)");
  EXPECT_EQ(st.message().find('\n'), absl::string_view::npos);
}

// A class folder this process may not list is PermissionDenied naming it,
// not an empty class. Root lists anything, so as root the check runs in a
// child that has become "nobody" (uid 65534), as file_reader_test does.
TEST(ImageFolder, AnUnreadableClassFolderIsPermissionDenied) {
  char base[] = "/tmp/cohort-images-XXXXXX";
  ASSERT_NE(mkdtemp(base), nullptr);
  ASSERT_EQ(chmod(base, 0755), 0);
  const std::string dir = base;
  FolderOptions o;
  o.classes = 2;
  o.train_per_class = 2;
  o.val_per_class = 1;
  WriteImageFolder(dir, o);
  const std::string locked = dir + "/train/class_01";
  ASSERT_EQ(chmod(locked.c_str(), 0), 0);
  const auto check = [&] {
    const absl::Status s = LoadDataset(Spec(2), dir, 1).status();
    return s.code() == absl::StatusCode::kPermissionDenied &&
           s.message().find(locked) != absl::string_view::npos;
  };
  bool refused = false;
  if (geteuid() != 0) {
    refused = check();
  } else {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const bool dropped = setgid(65534) == 0 && setuid(65534) == 0;
      _exit(dropped && check() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    refused = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  chmod(locked.c_str(), 0755);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(refused) << "a mode-000 class folder was not PermissionDenied";
}

// A training read draws its crop and flip from `draw`: the same draw, the
// same sample; evaluation reads do not depend on it.
TEST(ImageFolder, ReadsAreDeterministicPerDraw) {
  const std::string dir = Folder(2, 3, 1);
  absl::StatusOr<DataSplits> s = LoadDataset(Spec(2), dir, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  const size_t n = 3 * 16 * 16;
  std::vector<float> a(n), b(n), c(n);
  SampleOut out;
  out.features = a.data();
  ASSERT_TRUE(s->train->Read(4, 11, out).ok());
  EXPECT_EQ(out.label, 1);
  out.features = b.data();
  ASSERT_TRUE(s->train->Read(4, 11, out).ok());
  out.features = c.data();
  ASSERT_TRUE(s->train->Read(4, 12, out).ok());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  out.features = a.data();
  ASSERT_TRUE(s->test->Read(1, 11, out).ok());
  out.features = b.data();
  ASSERT_TRUE(s->test->Read(1, 99, out).ok());
  EXPECT_EQ(a, b);
}

TEST(ImageFolder, BadFilesFailTheirReadOrAreSkipped) {
  const std::string dir = Folder(2, 4, 1);
  const std::string bad = dir + "/train/class_01/00001.jpg";
  WriteBytes(bad, "GIF89a....");
  absl::StatusOr<DataSplits> s = LoadDataset(Spec(2), dir, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<float> x(3 * 16 * 16);
  SampleOut out;
  out.features = x.data();
  const absl::Status st = s->train->Read(5, 1, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), bad + ": not a JPEG or PNG file (a GIF image)");
  std::vector<int64_t> all(8);
  for (int i = 0; i < 8; ++i) all[i] = i;
  Batch batch;
  std::vector<float> scratch;
  FillBatch(*s->train, all, BatchLayout::kBatchOuter, &batch, &scratch);
  EXPECT_EQ(batch.error.code(), absl::StatusCode::kDataLoss);
  ReadOptions skip;
  skip.skip_bad_samples = true;
  FillBatch(*s->train, all, BatchLayout::kBatchOuter, &batch, &scratch, nullptr,
            skip);
  EXPECT_TRUE(batch.error.ok()) << batch.error;
  EXPECT_EQ(batch.skipped, 1);
  EXPECT_EQ(batch.size(), 8);
}

}  // namespace
}  // namespace cohort
