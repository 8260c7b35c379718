#include "worker/data/csv_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/quote.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// CSV tables larger than this are better as .npy files (kind NUMPY).
constexpr int64_t kMaxCsvBytes = int64_t{1} << 30;

class TableDataset : public Dataset {
 public:
  TableDataset(CsvTable table, int classes, int64_t limit)
      : table_(std::move(table)),
        shape_{table_.features},
        target_shape_(table_.targets.empty() ? Shape{} : Shape{1}),
        classes_(classes),
        size_(table_.rows()) {
    if (limit > 0 && limit < size_) size_ = limit;
  }
  int64_t size() const override { return size_; }
  const Shape& sample_shape() const override { return shape_; }
  const Shape& target_shape() const override { return target_shape_; }
  int num_classes() const override { return classes_; }
  absl::Status Read(int64_t index, uint64_t /*draw*/,
                    SampleOut& out) const override {
    std::memcpy(out.features, table_.values.data() + index * table_.features,
                table_.features * sizeof(float));
    if (table_.targets.empty()) {
      out.label = table_.classes[index];
    } else {
      out.target[0] = table_.targets[index];
    }
    return absl::OkStatus();
  }

 private:
  const CsvTable table_;
  const Shape shape_;
  const Shape target_shape_;
  const int classes_;
  int64_t size_;
};

std::vector<absl::string_view> Cells(absl::string_view line) {
  std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
  for (absl::string_view& c : cells) c = absl::StripAsciiWhitespace(c);
  return cells;
}

// A cell or column name as a message shows it: escaped, cut if long.
std::string CellText(absl::string_view cell) { return EscapeText(cell, 100); }

// Every column name once: with two of one name, which is the target (or
// which a reader by name would take) is a guess.
absl::Status CheckUniqueNames(const std::vector<absl::string_view>& header,
                              const std::string& path) {
  absl::flat_hash_map<absl::string_view, size_t> seen;
  for (size_t i = 0; i < header.size(); ++i) {
    const auto [it, fresh] = seen.emplace(header[i], i);
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuoteName(path), ":1: columns ", it->second + 1, " and ",
                       i + 1, " are both named '", CellText(header[i]), "'"));
    }
  }
  return absl::OkStatus();
}

// The target's position among the header's cells.
absl::StatusOr<size_t> TargetColumn(
    const std::vector<absl::string_view>& header, const std::string& path,
    const CsvSpec& spec) {
  RETURN_IF_ERROR(CheckUniqueNames(header, path));
  size_t target = header.size();
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == spec.target()) target = i;
  }
  if (target == header.size()) {
    const size_t shown = std::min<size_t>(header.size(), 20);
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(path), ":1: no column named '", CellText(spec.target()),
        "' (data.csv.target); the header has ",
        absl::StrJoin(header.begin(), header.begin() + shown, ", ",
                      [](std::string* out, absl::string_view name) {
                        out->append(CellText(name));
                      }),
        header.size() > shown ? ", ..." : ""));
  }
  if (static_cast<int>(header.size()) - 1 != spec.features()) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(path), ":1: ", header.size() - 1,
        " feature columns besides the target, where data.csv.features says ",
        spec.features()));
  }
  return target;
}

absl::Status BadCell(const std::string& path, int64_t line, size_t column,
                     absl::string_view name, absl::string_view cell,
                     absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(QuoteName(path), ":", line, ": column ", column + 1, " ('",
                   CellText(name), "'): '", CellText(cell), "' ", why));
}

absl::Status AddRow(const std::vector<absl::string_view>& header, size_t target,
                    absl::string_view line, int64_t number,
                    const std::string& path, const CsvSpec& spec,
                    CsvTable* table) {
  const std::vector<absl::string_view> cells = Cells(line);
  if (cells.size() != header.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteName(path), ":", number, ": ", cells.size(),
                     " cells where the header has ", header.size()));
  }
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i == target && spec.regression()) {
      float v = 0;
      if (!absl::SimpleAtof(cells[i], &v) || !std::isfinite(v)) {
        return BadCell(path, number, i, header[i], cells[i],
                       "is not a finite number (the regression target)");
      }
      table->targets.push_back(v);
      continue;
    }
    if (i == target) {
      int32_t c = 0;
      if (!absl::SimpleAtoi(cells[i], &c) || c < 0 || c >= spec.classes()) {
        return BadCell(path, number, i, header[i], cells[i],
                       absl::StrCat("is not a class in [0, data.csv.classes = ",
                                    spec.classes(), ")"));
      }
      table->classes.push_back(c);
      continue;
    }
    float v = 0;
    if (!absl::SimpleAtof(cells[i], &v) || !std::isfinite(v)) {
      return BadCell(path, number, i, header[i], cells[i],
                     "is not a finite number");
    }
    table->values.push_back(v);
  }
  return absl::OkStatus();
}

// Scales every feature to mean 0, deviation 1 with `train`'s statistics.
void Standardize(const CsvTable& train, std::vector<CsvTable*> tables) {
  const int f = train.features;
  const int64_t n = train.rows();
  std::vector<double> mean(f, 0), var(f, 0);
  for (int64_t r = 0; r < n; ++r) {
    for (int j = 0; j < f; ++j) mean[j] += train.values[r * f + j];
  }
  for (int j = 0; j < f; ++j) mean[j] /= std::max<int64_t>(n, 1);
  for (int64_t r = 0; r < n; ++r) {
    for (int j = 0; j < f; ++j) {
      const double d = train.values[r * f + j] - mean[j];
      var[j] += d * d;
    }
  }
  for (CsvTable* t : tables) {
    for (size_t i = 0; i < t->values.size(); ++i) {
      const int j = static_cast<int>(i % f);
      const double sd = std::sqrt(var[j] / std::max<int64_t>(n, 1));
      // A constant column stays centred rather than dividing by zero.
      t->values[i] =
          static_cast<float>((t->values[i] - mean[j]) / (sd > 0 ? sd : 1.0));
    }
  }
}

absl::StatusOr<CsvTable> LoadSplit(
    const google::protobuf::RepeatedPtrField<std::string>& files,
    const std::string& dir, const CsvSpec& spec) {
  CsvTable table;
  table.features = spec.features();
  for (const std::string& file : files) {
    const std::string path =
        file.empty() || file[0] == '/' || dir.empty() ? file : dir + "/" + file;
    ASSIGN_OR_RETURN(const std::string text,
                     ReadRegularFile(path, kMaxCsvBytes, "CSV file"));
    ASSIGN_OR_RETURN(CsvTable part, ParseCsv(text, path, spec));
    table.values.insert(table.values.end(), part.values.begin(),
                        part.values.end());
    table.classes.insert(table.classes.end(), part.classes.begin(),
                         part.classes.end());
    table.targets.insert(table.targets.end(), part.targets.begin(),
                         part.targets.end());
  }
  return table;
}

}  // namespace

absl::StatusOr<CsvTable> ParseCsv(absl::string_view text,
                                  const std::string& path,
                                  const CsvSpec& spec) {
  CsvTable table;
  table.features = spec.features();
  std::vector<absl::string_view> header;
  size_t target = 0;
  int64_t number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (header.empty()) {
      header = Cells(line);
      ASSIGN_OR_RETURN(target, TargetColumn(header, path, spec));
      continue;
    }
    RETURN_IF_ERROR(AddRow(header, target, line, number, path, spec, &table));
  }
  if (header.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        QuoteName(path), " is empty: a CSV file needs a header line"));
  }
  return table;
}

absl::StatusOr<DataSplits> LoadCsv(const DatasetSpec& spec,
                                   const std::string& dir) {
  const CsvSpec& c = spec.csv();
  ASSIGN_OR_RETURN(CsvTable train, LoadSplit(c.train(), dir, c));
  ASSIGN_OR_RETURN(CsvTable test, LoadSplit(c.test(), dir, c));
  if (train.rows() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.csv.train (", absl::StrJoin(c.train(), ", "), ") holds no rows"));
  }
  if (c.standardize()) Standardize(train, {&train, &test});
  DataSplits splits;
  splits.train = std::make_unique<TableDataset>(std::move(train), c.classes(),
                                                spec.train_limit());
  splits.test = std::make_unique<TableDataset>(std::move(test), c.classes(), 0);
  return splits;
}

}  // namespace cohort
