#include "worker/data/criteo_dataset.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/data/splitmix.h"
#include "worker/data/test_util.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// A spec of `dense` + `categorical` columns over `train` (and `test`).
DatasetSpec Spec(std::vector<std::string> train, int dense, int categorical,
                 std::vector<int64_t> rows,
                 std::vector<std::string> test = {}) {
  DatasetSpec d;
  d.set_kind(DatasetSpec::CRITEO);
  CriteoSpec* c = d.mutable_criteo();
  for (const std::string& f : train) c->add_train(f);
  for (const std::string& f : test) c->add_test(f);
  c->set_dense(dense);
  c->set_categorical(categorical);
  for (int64_t r : rows) c->add_table_rows(r);
  return d;
}

struct Sample {
  std::vector<float> x;
  float y = -1;
};

Sample ReadSample(const Dataset& d, int64_t i) {
  Sample s;
  s.x.resize(d.sample_shape()[0]);
  SampleOut out;
  out.features = s.x.data();
  out.target = &s.y;
  const absl::Status read = d.Read(i, 0, out);
  EXPECT_TRUE(read.ok()) << read;
  return s;
}

std::vector<Sample> ReadAll(const Dataset& d) {
  std::vector<Sample> all;
  for (int64_t i = 0; i < d.size(); ++i) all.push_back(ReadSample(d, i));
  return all;
}

// log(1 + x) as the data set computes it (in double, then rounded).
float Log1p(double x) { return static_cast<float>(std::log1p(x)); }

// The row a value hashes to, written out here from the documented rule.
uint64_t HashedRow(uint64_t value, int feature, uint64_t rows) {
  return SplitMix64Mix(value ^ SplitMix64Mix(static_cast<uint64_t>(feature))) %
         rows;
}

float Hi(uint64_t row) { return static_cast<float>(row >> 24); }
float Lo(uint64_t row) { return static_cast<float>(row & 0xFFFFFF); }

TEST(CriteoDataset, LogScalesCountsHashesValuesAndZeroesEmptyCells) {
  const std::string dir = MakeTempDir();
  // Two dense and two categorical columns; the second line leaves cells
  // empty and has a negative count (Criteo's I2 holds -1 and -2).
  WriteFile(dir + "/a.txt", Bytes("1\t3\t\t68fd1e64\t\n"
                                  "0\t-2\t1000000\t\t68FD1E64\n"));
  DatasetSpec spec = Spec({"a.txt"}, 2, 2, {1000});
  spec.mutable_criteo()->add_test("a.txt");
  absl::StatusOr<DataSplits> s = LoadCriteo(spec, dir, MakeTempDir());
  ASSERT_TRUE(s.ok()) << s.status();
  const Dataset& train = *s->train;
  EXPECT_EQ(train.size(), 2);
  EXPECT_EQ(train.sample_shape(), Shape({6}));
  EXPECT_EQ(train.target_shape(), Shape({1}));
  EXPECT_EQ(train.num_classes(), 0);
  EXPECT_TRUE(train.float_targets());
  EXPECT_FALSE(train.token_targets());
  EXPECT_EQ(train.categorical_rows(), std::vector<int64_t>({1000, 1000}));
  const uint64_t row0 = HashedRow(0x68fd1e64, 0, 1000);
  const uint64_t row1 = HashedRow(0x68fd1e64, 1, 1000);
  EXPECT_NE(row0, row1);  // the feature index is part of the hash
  const Sample a = ReadSample(train, 0);
  EXPECT_EQ(a.x, std::vector<float>({Log1p(3), 0, Hi(row0), Lo(row0), 0, 0}));
  EXPECT_EQ(a.y, 1.0f);
  const Sample b = ReadSample(train, 1);
  // Upper-case hexadecimal is the same value.
  EXPECT_EQ(b.x, std::vector<float>({0, Log1p(1e6), 0, 0, Hi(row1), Lo(row1)}));
  EXPECT_EQ(b.y, 0.0f);
  // The same files give the same rows in another load.
  absl::StatusOr<DataSplits> again = LoadCriteo(spec, dir, MakeTempDir());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ReadSample(*again->test, 0).x, a.x);
}

TEST(CriteoDataset, RowIdsPastTwoToThe24TravelAsExactPairs) {
  const std::string dir = MakeTempDir();
  // 0x1234567 = 19088743 = 1 * 2^24 + 2311527.
  WriteFile(dir + "/a.txt", Bytes("0\t7\t1234567\tffffffffffffffff\n"));
  DatasetSpec given = Spec({"a.txt"}, 1, 2, {int64_t{1} << 30, 1 << 20});
  given.mutable_criteo()->set_ids_as_given(true);
  WriteFile(dir + "/b.txt", Bytes("0\t7\t1234567\t0\n"));
  given.mutable_criteo()->set_train(0, "b.txt");
  given.mutable_criteo()->add_test("b.txt");
  absl::StatusOr<DataSplits> s = LoadCriteo(given, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ReadSample(*s->train, 0).x,
            std::vector<float>({Log1p(7), 1, 2311527, 0, 0}));
  // Hashed into a table of 2^40 rows: the pair rebuilds the row exactly.
  const int64_t big = int64_t{1} << 40;
  s = LoadCriteo(Spec({"a.txt"}, 1, 2, {big}, {"a.txt"}), dir);
  ASSERT_TRUE(s.ok()) << s.status();
  const Sample x = ReadSample(*s->train, 0);
  const uint64_t row = HashedRow(0xffffffffffffffffULL, 1, big);
  EXPECT_GT(row, uint64_t{1} << 24);
  EXPECT_EQ(static_cast<uint64_t>(x.x[3]) * (uint64_t{1} << 24) +
                static_cast<uint64_t>(x.x[4]),
            row);
  EXPECT_EQ(s->train->categorical_rows(), std::vector<int64_t>({big, big}));
}

// Lines of the generator's shape: a label, two counts and three values.
std::string Lines(int first, int count) {
  std::string text;
  for (int i = first; i < first + count; ++i) {
    text += std::to_string(i % 2) + "\t" + std::to_string(i) + "\t\t" +
            std::to_string(100 + i) + "\tabc" + std::to_string(i) + "\t" +
            (i % 3 == 0 ? "" : "7") + "\r\n";
  }
  return text;
}

TEST(CriteoDataset, GzipAndPlainFilesGiveTheSameSamples) {
  const std::string dir = MakeTempDir();
  const std::string text = Lines(0, 50);
  WriteFile(dir + "/p.txt", Bytes(text));
  WriteFile(dir + "/g.txt.gz", GzipBytes(Bytes(text)));
  absl::StatusOr<DataSplits> plain =
      LoadCriteo(Spec({"p.txt"}, 2, 3, {97}, {"p.txt"}), dir);
  absl::StatusOr<DataSplits> gz =
      LoadCriteo(Spec({"g.txt.gz"}, 2, 3, {97}, {"g.txt.gz"}), dir);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gz.ok()) << gz.status();
  ASSERT_EQ(plain->train->size(), 50);
  const std::vector<Sample> a = ReadAll(*plain->train);
  const std::vector<Sample> b = ReadAll(*gz->train);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].x, b[i].x) << "sample " << i;
    EXPECT_EQ(a[i].y, b[i].y) << "sample " << i;
  }
}

TEST(CriteoDataset, FilesOfASplitFollowEachOtherInOrder) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/all.txt", Bytes(Lines(0, 30)));
  // A blank line and a last line without its newline change nothing.
  std::string middle = Lines(10, 12) + "\n";
  WriteFile(dir + "/0.txt", Bytes(Lines(0, 10)));
  WriteFile(dir + "/1.txt.gz", GzipBytes(Bytes(middle)));
  std::string last = Lines(22, 8);
  last.resize(last.size() - 2);
  WriteFile(dir + "/2.txt", Bytes(last));
  absl::StatusOr<DataSplits> whole =
      LoadCriteo(Spec({"all.txt"}, 2, 3, {50}, {"0.txt"}), dir);
  absl::StatusOr<DataSplits> parts = LoadCriteo(
      Spec({"0.txt", "1.txt.gz", dir + "/2.txt"}, 2, 3, {50}, {"0.txt"}), dir);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->train->size(), 30);
  EXPECT_EQ(parts->test->size(), 10);
  for (int64_t i = 0; i < 30; ++i) {
    EXPECT_EQ(ReadSample(*parts->train, i).x, ReadSample(*whole->train, i).x);
  }
  EXPECT_EQ(ReadSample(*parts->test, 3).x, ReadSample(*whole->train, 3).x);
}

TEST(CriteoDataset, HoldsOutTheLastValFractionWithoutTestFiles) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/a.txt", Bytes(Lines(0, 20)));
  DatasetSpec spec = Spec({"a.txt"}, 2, 3, {50});
  spec.mutable_criteo()->set_val_fraction(0.25f);
  absl::StatusOr<DataSplits> s = LoadCriteo(spec, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->train->size(), 15);
  ASSERT_EQ(s->test->size(), 5);
  // Test sample 0 is line 16: count 15 in the first dense column.
  EXPECT_EQ(ReadSample(*s->test, 0).x[0], Log1p(15));
  EXPECT_EQ(ReadSample(*s->train, 14).x[0], Log1p(14));
  // Default 0.1; train_limit caps the training split only.
  spec.mutable_criteo()->set_val_fraction(0);
  spec.set_train_limit(4);
  s = LoadCriteo(spec, dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->train->size(), 4);
  EXPECT_EQ(s->test->size(), 2);
  // Too few samples to hold any out.
  WriteFile(dir + "/b.txt", Bytes(Lines(0, 5)));
  s = LoadCriteo(Spec({"b.txt"}, 2, 3, {50}), dir);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("of 5 training samples holds out none"));
}

// The error of a file whose second line is `line` (5 columns: a label, 2
// dense, 2 categorical; tables of 100 rows, ids as given if asked).
absl::Status BadLine(const std::string& line, bool ids_as_given = false) {
  const std::string dir = MakeTempDir();
  WriteFile(dir + "/bad.txt", Bytes("0\t1\t2\ta\tb\n" + line + "\n"));
  DatasetSpec spec = Spec({"bad.txt"}, 2, 2, {100}, {"bad.txt"});
  spec.mutable_criteo()->set_ids_as_given(ids_as_given);
  absl::StatusOr<DataSplits> s = LoadCriteo(spec, dir);
  return s.ok() ? absl::OkStatus() : s.status();
}

TEST(CriteoDataset, EachBadCellIsOneLineNamingFileLineAndColumn) {
  const struct {
    std::string line;
    bool ids_as_given;
    std::string message;
  } kCases[] = {
      {"1\t2\t3\ta", false,
       "bad.txt:2: 4 columns, expected 5 (the label, 2 dense and 2 "
       "categorical features, tab-separated)"},
      {"1\t2\t3\ta\tb\t", false, "bad.txt:2: 6 columns, expected 5"},
      {"2\t1\t2\ta\tb", false,
       "bad.txt:2: column 1 (the label): '2' is not 0 or 1"},
      {"\t1\t2\ta\tb", false, "bad.txt:2: column 1 (the label): '' is not"},
      {"1\t1.5\t2\ta\tb", false,
       "bad.txt:2: column 2 (dense feature I1): '1.5' is not an integer"},
      {"1\t1\t-\ta\tb", false,
       "bad.txt:2: column 3 (dense feature I2): '-' is not an integer"},
      {"1\t1\t1234567890123456789\ta\tb", false,
       "column 3 (dense feature I2): '1234567890123456789' has more than 18 "
       "digits"},
      {"1\t1\t2\tx\x01y\tb", false,
       "bad.txt:2: column 4 (categorical feature C1): 'x\\x01y' is not "
       "hexadecimal"},
      {"1\t1\t2\ta\t0123456789abcdef0", false,
       "column 5 (categorical feature C2): '0123456789abcdef0' has more than "
       "16 hexadecimal digits"},
      {"1\t1\t2\t63\t64", true,
       "bad.txt:2: column 5 (categorical feature C2): '64' is row 100, at or "
       "past its table's 100 rows (data.criteo.table_rows; ids_as_given)"},
  };
  for (const auto& c : kCases) {
    const absl::Status s = BadLine(c.line, c.ids_as_given);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.line;
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos);
  }
  EXPECT_TRUE(BadLine("1\t1\t2\t63\t63", true).ok());
}

TEST(CriteoDataset, MissingAndCorruptFilesNameTheFile) {
  const std::string dir = MakeTempDir();
  absl::StatusOr<DataSplits> s =
      LoadCriteo(Spec({"none.txt"}, 2, 2, {9}, {"none.txt"}), dir);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("none.txt"));
  std::vector<uint8_t> gz = GzipBytes(Bytes(Lines(0, 200)));
  gz.resize(gz.size() / 2);
  WriteFile(dir + "/cut.txt.gz", gz);
  s = LoadCriteo(Spec({"cut.txt.gz"}, 2, 3, {9}, {"cut.txt.gz"}), dir);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("cut.txt.gz: truncated gzip data"));
  WriteFile(dir + "/empty.txt", {});
  s = LoadCriteo(Spec({"empty.txt"}, 2, 3, {9}, {"empty.txt"}), dir);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("data.criteo.train (empty.txt) holds no samples"));
  // The records need a directory to go to.
  WriteFile(dir + "/ok.txt", Bytes(Lines(0, 20)));
  s = LoadCriteo(Spec({"ok.txt"}, 2, 3, {9}), dir, dir + "/none");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("cannot create a temporary file in " + dir +
                        "/none (set TMPDIR to a directory with room)"));
  // A line too long for the fixed buffer is refused, not buffered.
  WriteFile(dir + "/long.txt", std::vector<uint8_t>((1 << 20) + 10, '1'));
  s = LoadCriteo(Spec({"long.txt"}, 2, 3, {9}, {"long.txt"}), dir);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("long.txt:1: longer than 1048576 bytes"));
}

// The job spec: defaults filled, each field checked where it is written.
std::string ErrorOf(const std::string& criteo) {
  const std::string text =
      "name: \"c\"\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n"
      "model { layers { linear { out_features: 1 } } }\n"
      "loss: BCE_WITH_LOGITS\n"
      "data { kind: CRITEO criteo { " +
      criteo + " } }\n";  // line 7
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "x");
  return spec.ok() ? "OK" : std::string(spec.status().message());
}

TEST(CriteoSpec, DefaultsAndChecks) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "name: \"c\"\nbatch_size: 8\nepochs: 1\noptimizer { lr: 0.1 }\n"
      "model { layers { linear { out_features: 1 } } }\n"
      "data { kind: CRITEO criteo { train: \"a\" table_rows: 1000 } }\n",
      "x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const CriteoSpec& c = spec->data().criteo();
  EXPECT_EQ(c.dense(), 13);
  EXPECT_EQ(c.categorical(), 26);
  EXPECT_FLOAT_EQ(c.val_fraction(), 0.1f);
  EXPECT_EQ(c.table_rows_size(), 26);
  // Float targets default to MSE; a click model asks for BCE_WITH_LOGITS.
  EXPECT_EQ(spec->loss(), MSE);
  EXPECT_EQ(ErrorOf("train: \"a\" table_rows: [5, 6]"),
            "x:7:41: data.criteo.table_rows must be 1 value (every table) or "
            "26 (one per categorical feature), got 2 values");
  EXPECT_EQ(ErrorOf("train: \"a\" categorical: 2 table_rows: [5, 6]"), "OK");
  EXPECT_EQ(ErrorOf("train: \"a\""),
            "x:7:21: data.criteo.table_rows must be 1 value (every table) or "
            "26 (one per categorical feature), got 0 values (missing)");
  EXPECT_EQ(ErrorOf("train: \"a\" categorical: 2 table_rows: [5, 0]"),
            "x:7:56: data.criteo.table_rows[1] must be in [1, 2^48], got 0");
  EXPECT_EQ(ErrorOf("table_rows: 5"),
            "x:7:21: data.criteo.train must be at least one training file "
            "(text or .gz), got none (missing)");
  EXPECT_EQ(ErrorOf("train: \"a\" table_rows: 5 dense: -1"),
            "x:7:55: data.criteo.dense must be in [1, 65536] (0: 13), got -1");
  EXPECT_EQ(ErrorOf("train: \"a\" table_rows: 5 val_fraction: 1"),
            "x:7:55: data.criteo.val_fraction must be in (0, 1) (0: 0.1 "
            "without test files), got 1");
  EXPECT_EQ(ErrorOf("train: \"a\" test: \"b\" table_rows: 5 val_fraction: 0.5"),
            "x:7:65: data.criteo.val_fraction applies only to no test files, "
            "got kind test files");
}

}  // namespace
}  // namespace cohort
