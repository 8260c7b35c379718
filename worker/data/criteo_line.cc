#include "worker/data/criteo_line.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "worker/data/splitmix.h"

namespace cohort {
namespace {

// Dense cells are mostly small counts: their logarithms come from a table
// (filled with the same expression the large ones use, so both agree).
constexpr int kLogTableSize = 4096;

const std::array<float, kLogTableSize>& LogTable() {
  static const std::array<float, kLogTableSize>* const table = [] {
    auto* t = new std::array<float, kLogTableSize>();
    for (int i = 0; i < kLogTableSize; ++i) {
      (*t)[i] = static_cast<float>(std::log1p(static_cast<double>(i)));
    }
    return t;
  }();
  return *table;
}

float LogCount(int64_t x) {
  if (x <= 0) return 0.0f;
  if (x < kLogTableSize) return LogTable()[x];
  return static_cast<float>(std::log1p(static_cast<double>(x)));
}

// Each byte's value as a hexadecimal digit, or -1: a table keeps the digit
// loop free of branches, which letters and digits would mispredict.
struct HexTable {
  int8_t digit[256];
  constexpr HexTable() : digit() {
    for (int c = 0; c < 256; ++c) {
      digit[c] = c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : -1;
    }
  }
};
constexpr HexTable kHex;

// 18 decimal digits always fit an int64_t.
constexpr int kMaxDenseDigits = 18;
constexpr int kMaxHexDigits = 16;
// Row ids travel as two floats, r >> 24 and r & 0xFFFFFF.
constexpr int kLowBits = 24;

}  // namespace

uint64_t CriteoHashedRow(uint64_t value, int feature, uint64_t rows) {
  return SplitMix64Mix(value ^ SplitMix64Mix(static_cast<uint64_t>(feature))) %
         rows;
}

CriteoLineParser::CriteoLineParser(const CriteoSpec& spec)
    : dense_(spec.dense()),
      categorical_(spec.categorical()),
      ids_as_given_(spec.ids_as_given()) {
  CHECK(spec.table_rows_size() == categorical_)
      << "CriteoLineParser needs one table_rows value per feature";
  for (int t = 0; t < categorical_; ++t) {
    CHECK(spec.table_rows(t) > 0) << "table_rows must be > 0";
    rows_.push_back(static_cast<uint64_t>(spec.table_rows(t)));
    feature_keys_.push_back(SplitMix64Mix(static_cast<uint64_t>(t)));
  }
  LogTable();  // built once, before any parsing thread needs it
}

absl::Status CriteoLineParser::Parse(absl::string_view line,
                                     const std::string& path, int64_t number,
                                     float* record) const {
  const Where where{path, number};
  const char* p = line.data();
  const char* const end = p + line.size();
  const int columns = 1 + dense_ + categorical_;
  for (int c = 0; c < columns; ++c) {
    const char* tab = static_cast<const char*>(std::memchr(p, '\t', end - p));
    const bool last = c + 1 == columns;
    if ((tab == nullptr) != last) return ColumnCountError(line, where);
    const char* const cell_end = last ? end : tab;
    if (c == 0) {
      if (cell_end - p != 1 || (*p != '0' && *p != '1')) {
        return CellError(where, c, absl::string_view(p, cell_end - p),
                         "is not 0 or 1");
      }
      record[sample_floats()] = *p == '1' ? 1.0f : 0.0f;
    } else if (c <= dense_) {
      const Fault fault = ParseDense(p, cell_end, &record[c - 1]);
      if (fault != Fault::kNone) {
        return CellError(where, c, absl::string_view(p, cell_end - p),
                         fault == Fault::kTooLong ? "has more than 18 digits"
                                                  : "is not an integer");
      }
    } else {
      const int t = c - 1 - dense_;
      RETURN_IF_ERROR(
          ParseCategorical(p, cell_end, t, where, &record[dense_ + 2 * t]));
    }
    p = cell_end + 1;
  }
  return absl::OkStatus();
}

CriteoLineParser::Fault CriteoLineParser::ParseDense(const char* begin,
                                                     const char* end,
                                                     float* out) const {
  if (begin == end) {
    *out = 0.0f;
    return Fault::kNone;
  }
  const bool negative = *begin == '-';
  if (negative) ++begin;
  if (begin == end) return Fault::kNotInteger;
  if (end - begin > kMaxDenseDigits) {
    for (const char* q = begin; q < end; ++q) {
      if (*q < '0' || *q > '9') return Fault::kNotInteger;
    }
    return Fault::kTooLong;
  }
  int64_t x = 0;
  for (const char* q = begin; q < end; ++q) {
    const unsigned digit = static_cast<unsigned char>(*q) - '0';
    if (digit > 9) return Fault::kNotInteger;
    x = 10 * x + digit;
  }
  *out = negative ? 0.0f : LogCount(x);
  return Fault::kNone;
}

absl::Status CriteoLineParser::ParseCategorical(const char* begin,
                                                const char* end, int t,
                                                const Where& where,
                                                float* out) const {
  uint64_t value = 0;
  const bool empty = begin == end;
  if (!empty) {
    const absl::string_view cell(begin, end - begin);
    if (end - begin > kMaxHexDigits) {
      return CellError(where, 1 + dense_ + t, cell,
                       "has more than 16 hexadecimal digits");
    }
    int bad = 0;  // negative once any byte is not a digit
    for (const char* q = begin; q < end; ++q) {
      const int digit = kHex.digit[static_cast<unsigned char>(*q)];
      bad |= digit;
      value = (value << 4) | static_cast<uint64_t>(digit & 15);
    }
    if (bad < 0) {
      return CellError(where, 1 + dense_ + t, cell, "is not hexadecimal");
    }
    if (ids_as_given_ && value >= rows_[t]) {
      return CellError(
          where, 1 + dense_ + t, cell,
          absl::StrCat("is row ", value, ", at or past its table's ", rows_[t],
                       " rows (data.criteo.table_rows; ids_as_given)"));
    }
  }
  const uint64_t row = empty ? 0
                       : ids_as_given_
                           ? value
                           : SplitMix64Mix(value ^ feature_keys_[t]) % rows_[t];
  out[0] = static_cast<float>(row >> kLowBits);
  out[1] = static_cast<float>(row & ((uint64_t{1} << kLowBits) - 1));
  return absl::OkStatus();
}

absl::Status CriteoLineParser::ColumnCountError(absl::string_view line,
                                                const Where& where) const {
  const int64_t columns =
      1 + static_cast<int64_t>(std::count(line.begin(), line.end(), '\t'));
  return absl::InvalidArgumentError(absl::StrCat(
      QuoteName(where.path), ":", where.number, ": ", columns,
      " columns, expected ", 1 + dense_ + categorical_, " (the label, ", dense_,
      " dense and ", categorical_, " categorical features, tab-separated)"));
}

absl::Status CriteoLineParser::CellError(const Where& where, int column,
                                         absl::string_view cell,
                                         absl::string_view why) const {
  return absl::InvalidArgumentError(absl::StrCat(
      QuoteName(where.path), ":", where.number, ": column ", column + 1, " (",
      ColumnName(column), "): '", EscapeText(cell, 100), "' ", why));
}

std::string CriteoLineParser::ColumnName(int column) const {
  if (column == 0) return "the label";
  if (column <= dense_) return absl::StrCat("dense feature I", column);
  return absl::StrCat("categorical feature C", column - dense_);
}

}  // namespace cohort
