// The few pieces of JSON writing cohort's reports need, and a reader for
// the JSON inside files cohort loads (a safetensors header).
//
// The reader takes untrusted input: it is one pass over the text (time and
// memory linear in its size) and refuses nesting deeper than a bound, for
// arrays and objects alike, before it could exhaust the stack. Its messages
// are one line and quote nothing of the input but escaped key names.
//
// Thread safety: pure functions; a JsonValue is a plain value.
#ifndef COHORT_COMMON_JSON_H_
#define COHORT_COMMON_JSON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// `s` as a JSON string literal, quotes included.
std::string JsonString(const std::string& s);

// A number; NaN and infinities (a diverged loss) become null, which JSON
// can represent and they cannot.
std::string JsonNumber(double v);

// JsonNumber, except that a negative value -- cohort's marker for "not
// measured" -- becomes null.
std::string JsonOptional(double v);

// {"name": value, ...} in the order given (an empty object for none).
std::string JsonObject(const std::vector<std::pair<std::string, double>>& kv);

// One parsed JSON value; owns its children.
struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  // A string's value; for a number, its text as written (so that integers
  // past 2^53 stay exact: see AsUint64).
  std::string text;
  std::vector<JsonValue> array;
  // In the order written; the reader refuses duplicate keys.
  std::vector<std::pair<std::string, JsonValue>> object;

  // The member `key` of an object, or nullptr.
  const JsonValue* Find(absl::string_view key) const;
  // A number written as a non-negative integer (no fraction or exponent)
  // that fits in 64 bits.
  bool AsUint64(uint64_t* out) const;
};

struct JsonLimits {
  // Deep enough for any document cohort reads (a safetensors header nests
  // three levels); far too shallow to exhaust a stack.
  int max_depth = 64;
  // A JsonValue takes about 100 bytes where "0," takes 2: this bounds the
  // memory a large document can claim (about 100 MB), and still allows a
  // safetensors header of 100,000 tensors.
  int64_t max_values = int64_t{1} << 20;
};

// Parses `text`, one JSON value with optional white space around it.
// InvalidArgument for malformed JSON, a duplicate key in an object, arrays
// and objects nested deeper than the limit, or more values than it, with a
// message of the form "at byte N: what was wrong".
absl::StatusOr<JsonValue> ParseJson(absl::string_view text,
                                    const JsonLimits& limits = {});

}  // namespace cohort

#endif  // COHORT_COMMON_JSON_H_
