// One line of a Criteo click log (DatasetSpec kind CRITEO) into one
// fixed-size record of floats: the sample's features as the CRITEO data set
// gives them, then the label.
//
// A line is tab-separated: the label (0 or 1), `dense` integer cells
// (Criteo's I1..I13) and `categorical` hexadecimal cells (C1..C26); any
// feature cell may be empty. Dense cell x becomes log(1 + max(x, 0)), an
// empty one 0. Categorical feature t's value v becomes a row r of its table,
// CriteoHashedRow(v, t, rows) or v itself with ids_as_given, and an empty
// cell row 0; r is written as the two floats r >> 24 and r & 0xFFFFFF
// (EmbeddingBagSpec), so tables may pass 2^24 rows with every float exact.
//
// Ownership: a value type. Thread safety: immutable after construction;
// Parse() may run on many threads at once.
#ifndef COHORT_WORKER_DATA_CRITEO_LINE_H_
#define COHORT_WORKER_DATA_CRITEO_LINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace cohort {

// The row that hashing gives value `value` of categorical feature `feature`
// (0-based) in a table of `rows` rows: SplitMix64's finaliser
// (worker/data/splitmix.h) of value XOR the finaliser of the feature index,
// modulo rows. Fixed, so rows mean the same in every process and run.
uint64_t CriteoHashedRow(uint64_t value, int feature, uint64_t rows);

class CriteoLineParser {
 public:
  // `spec` with its defaults filled (FillCriteoDefaults): dense and
  // categorical set, one table_rows value per categorical feature.
  explicit CriteoLineParser(const CriteoSpec& spec);

  // Floats of a sample's features: dense + 2 categorical.
  int sample_floats() const { return dense_ + 2 * categorical_; }
  // Floats of a record: the sample's features, then the label.
  int record_floats() const { return sample_floats() + 1; }

  // Parses `line` (line `number` of `path`, both named in messages) into
  // `record` (record_floats() floats). InvalidArgument, one line naming
  // path, line and column (1-based), for a wrong number of columns, a label
  // that is not 0 or 1, a dense cell that is not an integer of at most 18
  // digits, a categorical cell that is not hexadecimal of at most 16
  // digits, or, with ids_as_given, a value at or past its table's rows.
  absl::Status Parse(absl::string_view line, const std::string& path,
                     int64_t number, float* record) const;

 private:
  // Where a line came from, for messages.
  struct Where {
    const std::string& path;
    int64_t number;
  };
  enum class Fault { kNone, kNotInteger, kTooLong };

  Fault ParseDense(const char* begin, const char* end, float* out) const;
  absl::Status ParseCategorical(const char* begin, const char* end, int t,
                                const Where& where, float* out) const;
  absl::Status ColumnCountError(absl::string_view line,
                                const Where& where) const;
  absl::Status CellError(const Where& where, int column, absl::string_view cell,
                         absl::string_view why) const;
  // Criteo's name of column `column` (0-based): label, I1.., C1...
  std::string ColumnName(int column) const;

  int dense_ = 0;
  int categorical_ = 0;
  bool ids_as_given_ = false;
  std::vector<uint64_t> rows_;
  // SplitMix64Mix of each feature index, mixed into its values' hashes.
  std::vector<uint64_t> feature_keys_;
};

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_CRITEO_LINE_H_
