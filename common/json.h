// The few pieces of JSON writing cohort's reports need. Thread-safe (pure
// functions).
#ifndef COHORT_COMMON_JSON_H_
#define COHORT_COMMON_JSON_H_

#include <string>
#include <utility>
#include <vector>

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

}  // namespace cohort

#endif  // COHORT_COMMON_JSON_H_
