#include "worker/data/criteo_dataset.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "worker/data/line_reader.h"

namespace cohort {
namespace {

// A Criteo line is a few hundred bytes; anything near this is not one.
constexpr size_t kMaxLineBytes = size_t{1} << 20;
// Row ids travel as two floats, the high one exact below 2^24.
constexpr int64_t kMaxTableRows = int64_t{1} << 48;

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

std::vector<std::string> Paths(
    const google::protobuf::RepeatedPtrField<std::string>& files,
    const std::string& dir) {
  std::vector<std::string> paths;
  for (const std::string& f : files) paths.push_back(Resolve(dir, f));
  return paths;
}

// A spec built in code skips the spec checker; the parser relies on these.
absl::Status CheckTables(const CriteoSpec& c) {
  if (c.table_rows_size() != c.categorical()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.criteo.table_rows holds ", c.table_rows_size(),
                     " values; expected 1 (every table) or ", c.categorical(),
                     " (one per categorical feature)"));
  }
  for (int t = 0; t < c.table_rows_size(); ++t) {
    if (c.table_rows(t) <= 0 || c.table_rows(t) > kMaxTableRows) {
      return absl::InvalidArgumentError(absl::StrCat("data.criteo.table_rows[",
                                                     t,
                                                     "] must be in [1, 2^48], "
                                                     "got ",
                                                     c.table_rows(t)));
    }
  }
  return absl::OkStatus();
}

absl::Status NoSamples(
    absl::string_view field,
    const google::protobuf::RepeatedPtrField<std::string>& f) {
  return absl::InvalidArgumentError(absl::StrCat("data.criteo.", field, " (",
                                                 absl::StrJoin(f, ", "),
                                                 ") holds no samples"));
}

// [first, first + count) of the records, for each split.
struct Ranges {
  int64_t train_first = 0, train_count = 0;
  int64_t test_first = 0, test_count = 0;
};

absl::StatusOr<Ranges> SplitRanges(const CriteoSpec& c, int64_t train_rows,
                                   int64_t test_rows) {
  if (train_rows == 0) return NoSamples("train", c.train());
  Ranges r;
  if (c.test_size() > 0) {
    if (test_rows == 0) return NoSamples("test", c.test());
    r.train_count = train_rows;
    r.test_first = train_rows;
    r.test_count = test_rows;
    return r;
  }
  // The tail, as the TOKENS data set holds out its text: samples in file
  // order, so the held-out ones are the latest logged.
  const int64_t held =
      static_cast<int64_t>(static_cast<double>(train_rows) * c.val_fraction());
  if (held == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last data.criteo.val_fraction (", c.val_fraction(),
                     ") of ", train_rows,
                     " training samples holds out none; add samples, raise "
                     "val_fraction or give test files"));
  }
  r.train_count = train_rows - held;
  r.test_first = r.train_count;
  r.test_count = held;
  return r;
}

}  // namespace

absl::StatusOr<int64_t> AppendCriteoFiles(const std::vector<std::string>& paths,
                                          const CriteoLineParser& parser,
                                          ScratchFile* out) {
  std::vector<float> record(parser.record_floats());
  const size_t record_bytes = record.size() * sizeof(float);
  int64_t rows = 0;
  for (const std::string& path : paths) {
    RETURN_IF_ERROR(ForEachLine(
        path, kMaxLineBytes,
        [&](absl::string_view line, int64_t number) -> absl::Status {
          if (line.empty()) return absl::OkStatus();
          RETURN_IF_ERROR(parser.Parse(line, path, number, record.data()));
          ++rows;
          return out->Append(record.data(), record_bytes);
        }));
  }
  return rows;
}

absl::StatusOr<DataSplits> LoadCriteo(const DatasetSpec& spec,
                                      const std::string& dir,
                                      const std::string& scratch_dir) {
  CriteoSpec c = spec.criteo();
  FillCriteoDefaults(&c);
  RETURN_IF_ERROR(CheckTables(c));
  const CriteoLineParser parser(c);
  ASSIGN_OR_RETURN(std::unique_ptr<ScratchFile> scratch,
                   ScratchFile::Create(scratch_dir));
  ASSIGN_OR_RETURN(
      const int64_t train_rows,
      AppendCriteoFiles(Paths(c.train(), dir), parser, scratch.get()));
  ASSIGN_OR_RETURN(
      const int64_t test_rows,
      AppendCriteoFiles(Paths(c.test(), dir), parser, scratch.get()));
  ASSIGN_OR_RETURN(const Ranges r, SplitRanges(c, train_rows, test_rows));
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, scratch->Map());
  const std::shared_ptr<const MappedFile> records(std::move(mapped));
  const std::vector<int64_t> rows(c.table_rows().begin(), c.table_rows().end());
  DataSplits splits;
  splits.train = std::make_unique<CriteoDataset>(
      records, r.train_first, r.train_count, parser.sample_floats(), rows,
      spec.train_limit());
  splits.test = std::make_unique<CriteoDataset>(
      records, r.test_first, r.test_count, parser.sample_floats(), rows, 0);
  return splits;
}

CriteoDataset::CriteoDataset(std::shared_ptr<const MappedFile> records,
                             int64_t first, int64_t count, int sample_floats,
                             std::vector<int64_t> table_rows, int64_t limit)
    : records_(std::move(records)),
      first_(static_cast<const float*>(records_->map()) +
             first * (sample_floats + 1)),
      sample_floats_(sample_floats),
      shape_({sample_floats}),
      target_shape_({1}),
      table_rows_(std::move(table_rows)),
      size_(limit > 0 ? std::min(count, limit) : count) {
  CHECK(static_cast<int64_t>(records_->bytes()) >=
        (first + count) * (sample_floats + 1) *
            static_cast<int64_t>(sizeof(float)))
      << "CriteoDataset: records past the end of the mapping";
}

absl::Status CriteoDataset::Read(int64_t index, uint64_t /*draw*/,
                                 SampleOut& out) const {
  CHECK(index >= 0 && index < size_)
      << "CriteoDataset: sample " << index << " of " << size_;
  const float* record = first_ + index * (sample_floats_ + 1);
  std::memcpy(out.features, record, sample_floats_ * sizeof(float));
  out.target[0] = record[sample_floats_];
  return absl::OkStatus();
}

}  // namespace cohort
