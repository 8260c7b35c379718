#include "common/quote.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace cohort {
namespace {

// The length of the valid UTF-8 sequence starting at s[i] (0 when it is not
// one), and its code point.
size_t Utf8Length(absl::string_view s, size_t i, uint32_t* code) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b = byte(i);
  size_t n;
  uint32_t min;
  if (b >= 0xc2 && b <= 0xdf) {
    n = 2, min = 0x80, *code = b & 0x1f;
  } else if (b >= 0xe0 && b <= 0xef) {
    n = 3, min = 0x800, *code = b & 0x0f;
  } else if (b >= 0xf0 && b <= 0xf4) {
    n = 4, min = 0x10000, *code = b & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    *code = *code << 6 | (byte(i + k) & 0x3f);
  }
  // Overlong forms, surrogates and code points past Unicode are not UTF-8.
  if (*code < min || (*code >= 0xd800 && *code <= 0xdfff) || *code > 0x10ffff) {
    return 0;
  }
  return n;
}

// Appends s[i] (an ASCII byte) escaped if it must be; false when it is not
// ASCII.
bool AppendAscii(char c, std::string* out) {
  switch (c) {
    case '\n':
      *out += "\\n";
      return true;
    case '\r':
      *out += "\\r";
      return true;
    case '\t':
      *out += "\\t";
      return true;
    case '\\':
    case '"':
    case '\'':
      *out += '\\';
      *out += c;
      return true;
  }
  const uint8_t b = static_cast<uint8_t>(c);
  if (b >= 0x80) return false;
  if (b < 0x20 || b == 0x7f) {
    absl::StrAppendFormat(out, "\\x%02x", b);
  } else {
    *out += c;
  }
  return true;
}

}  // namespace

std::string EscapeText(absl::string_view s, size_t max_bytes) {
  std::string out;
  const size_t end = s.size() < max_bytes ? s.size() : max_bytes;
  for (size_t i = 0; i < end;) {
    if (AppendAscii(s[i], &out)) {
      ++i;
      continue;
    }
    uint32_t code = 0;
    const size_t n = Utf8Length(s, i, &code);
    const bool shown = n > 0 && i + n <= end && code >= 0xa0 &&
                       code != 0x2028 && code != 0x2029;
    if (shown) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<uint8_t>(s[i]));
      ++i;
    }
  }
  if (end < s.size()) out += "...";
  return out;
}

std::string QuoteName(absl::string_view name) {
  std::string escaped = EscapeText(name);
  if (!name.empty() && escaped == name) return escaped;
  return "\"" + escaped + "\"";
}

}  // namespace cohort
