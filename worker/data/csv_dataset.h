// Tables in CSV files (DatasetSpec kind CSV), read whole into memory as
// float32 features and int32 classes or float32 regression targets.
//
// Ownership: the data sets own their values. Thread safety: immutable once
// built, so Get() is thread-safe.
#ifndef COHORT_WORKER_DATA_CSV_DATASET_H_
#define COHORT_WORKER_DATA_CSV_DATASET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"
#include "worker/data/dataset.h"

namespace cohort {

// A table's rows: `features` values per row, then one class per row (or,
// for a regression table, one float target per row).
struct CsvTable {
  int features = 0;
  std::vector<float> values;
  std::vector<int32_t> classes;
  std::vector<float> targets;

  int64_t rows() const {
    return static_cast<int64_t>(classes.size() + targets.size());
  }
};

// Parses `text` (the contents of `path`) against `spec`: the header must
// name each column once and have the target column and spec.features
// others; every cell a finite number, every class an integer in [0,
// spec.classes) (any finite number with spec.regression). InvalidArgument
// naming the file, line and column of the first bad cell, in one line
// (cells and names escaped).
absl::StatusOr<CsvTable> ParseCsv(absl::string_view text,
                                  const std::string& path, const CsvSpec& spec);

// Both splits of `spec` (kind CSV), paths relative to `dir`.
absl::StatusOr<DataSplits> LoadCsv(const DatasetSpec& spec,
                                   const std::string& dir);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_CSV_DATASET_H_
