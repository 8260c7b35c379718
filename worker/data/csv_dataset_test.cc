#include "worker/data/csv_dataset.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

CsvSpec Spec(int features = 2) {
  CsvSpec s;
  s.set_target("label");
  s.set_classes(3);
  s.set_features(features);
  return s;
}

std::string ErrorOf(const std::string& text, const CsvSpec& spec = Spec()) {
  absl::StatusOr<CsvTable> t = ParseCsv(text, "t.csv", spec);
  return t.ok() ? "OK" : std::string(t.status().message());
}

TEST(Csv, ReadsFeaturesAndTheTargetWhereverItIs) {
  absl::StatusOr<CsvTable> t =
      ParseCsv("a, label ,b\r\n1.5,2,-3\n\n 0 , 0, 1e2\n", "t.csv", Spec());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->values, (std::vector<float>{1.5f, -3, 0, 100}));
  EXPECT_EQ(t->classes, (std::vector<int32_t>{2, 0}));
}

TEST(Csv, NamesTheFileLineAndColumnOfABadCell) {
  EXPECT_EQ(ErrorOf("a,b,label\n1,2,0\n1,x,0\n"),
            "t.csv:3: column 2 ('b'): 'x' is not a finite number");
  EXPECT_EQ(ErrorOf("a,b,label\n1,,0\n"),
            "t.csv:2: column 2 ('b'): '' is not a finite number");
  EXPECT_EQ(ErrorOf("a,b,label\n1,nan,0\n"),
            "t.csv:2: column 2 ('b'): 'nan' is not a finite number");
  EXPECT_EQ(ErrorOf("a,b,label\n1,2,3\n"),
            "t.csv:2: column 3 ('label'): '3' is not a class in [0, "
            "data.csv.classes = 3)");
  EXPECT_EQ(ErrorOf("a,b,label\n1,2\n"),
            "t.csv:2: 2 cells where the header has 3");
  EXPECT_THAT(ErrorOf("a,b,y\n1,2,0\n"),
              HasSubstr("t.csv:1: no column named 'label'"));
  EXPECT_EQ(ErrorOf("a,b,label\n", Spec(3)),
            "t.csv:1: 2 feature columns besides the target, where "
            "data.csv.features says 3");
  EXPECT_EQ(ErrorOf("\n\n"), "t.csv is empty: a CSV file needs a header line");
}

// Two columns of one name: which is the target (or which a reader by name
// takes) would be a guess.
TEST(Csv, DuplicateColumnNamesAreRefusedByName) {
  EXPECT_EQ(ErrorOf("a,b,a,label\n1,2,3,0\n", Spec(3)),
            "t.csv:1: columns 1 and 3 are both named 'a'");
  EXPECT_EQ(ErrorOf("label,a,label\n1,2,0\n"),
            "t.csv:1: columns 1 and 3 are both named 'label'");
}

// A cell's bytes are escaped: a NUL no longer cuts the message before its
// reason, a line break no longer splits it.
TEST(Csv, CellsAndNamesAreEscapedInOneLine) {
  const std::string nul = ErrorOf(std::string("a,b,label\n1,2\0x,0\n", 18));
  EXPECT_EQ(nul, "t.csv:2: column 2 ('b'): '2\\x00x' is not a finite number");
  EXPECT_EQ(nul.find('\0'), std::string::npos);
  EXPECT_EQ(ErrorOf("a,b\x1b[2J,label\n1,x,0\n"),
            "t.csv:2: column 2 ('b\\x1b[2J'): 'x' is not a finite number");
  EXPECT_EQ(ErrorOf("a,'b',y\n1,2,0\n"),
            "t.csv:1: no column named 'label' (data.csv.target); the header "
            "has a, \\'b\\', y");
  absl::StatusOr<CsvTable> t =
      ParseCsv("a,b,label\n1,x,0\n", "dir\n/t.csv", Spec());
  EXPECT_EQ(t.status().message(),
            "\"dir\\n/t.csv\":2: column 2 ('b'): 'x' is not a finite number");
}

TEST(Csv, StandardizesWithTheTrainingSplitsStatistics) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/train.csv",
            std::vector<uint8_t>({'x', ',', 'l', '\n', '1', ',', '0', '\n', '3',
                                  ',', '1', '\n'}));
  WriteFile(dir + "/test.csv",
            std::vector<uint8_t>({'x', ',', 'l', '\n', '5', ',', '1', '\n'}));
  DatasetSpec spec;
  spec.set_kind(DatasetSpec::CSV);
  CsvSpec* c = spec.mutable_csv();
  c->add_train("train.csv");
  c->add_test("test.csv");
  c->set_target("l");
  c->set_classes(2);
  c->set_features(1);
  c->set_standardize(true);
  absl::StatusOr<DataSplits> s = LoadCsv(spec, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  float x = 0;
  EXPECT_EQ(LabelOf(*s->train, 0, &x), 0);
  EXPECT_FLOAT_EQ(x, -1.0f);  // mean 2, deviation 1
  EXPECT_EQ(LabelOf(*s->test, 0, &x), 1);
  EXPECT_FLOAT_EQ(x, 3.0f);
}

}  // namespace
}  // namespace cohort
