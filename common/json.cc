#include "common/json.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace cohort {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string JsonOptional(double v) { return v < 0 ? "null" : JsonNumber(v); }

std::string JsonObject(const std::vector<std::pair<std::string, double>>& kv) {
  std::string s = "{";
  for (size_t i = 0; i < kv.size(); ++i) {
    s += (i ? ", " : "") + JsonString(kv[i].first) + ": " +
         JsonNumber(kv[i].second);
  }
  return s + "}";
}

}  // namespace cohort
