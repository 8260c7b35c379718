#include "common/json.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quote.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

void AppendUtf8(uint32_t code, std::string* out) {
  if (code < 0x80) {
    *out += static_cast<char>(code);
  } else if (code < 0x800) {
    *out += static_cast<char>(0xc0 | code >> 6);
    *out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    *out += static_cast<char>(0xe0 | code >> 12);
    *out += static_cast<char>(0x80 | (code >> 6 & 0x3f));
    *out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | code >> 18);
    *out += static_cast<char>(0x80 | (code >> 12 & 0x3f));
    *out += static_cast<char>(0x80 | (code >> 6 & 0x3f));
    *out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

}  // namespace

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

const JsonValue* JsonValue::Find(absl::string_view key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool JsonValue::AsUint64(uint64_t* out) const {
  if (type != Type::kNumber || text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(text, out);
}

namespace {

// Recursive descent over the text, never revisiting a byte. The recursion
// is as deep as the document's nesting, which Nested() bounds.
class JsonParser {
 public:
  JsonParser(absl::string_view text, const JsonLimits& limits)
      : s_(text), limits_(limits) {}

  absl::StatusOr<JsonValue> Document() {
    JsonValue v;
    SkipSpace();
    RETURN_IF_ERROR(Value(&v, 0));
    SkipSpace();
    if (pos_ < s_.size()) return Error("more text after the JSON value");
    return v;
  }

 private:
  absl::Status Value(JsonValue* out, int depth);
  absl::Status Nested(JsonValue* out, int depth);
  absl::Status Array(JsonValue* out, int depth);
  absl::Status Object(JsonValue* out, int depth);
  absl::Status String(std::string* out);
  absl::Status Escape(std::string* out);
  absl::Status Hex4(uint32_t* out);
  absl::Status Number(JsonValue* out);
  absl::Status Literal(absl::string_view word, JsonValue* out);

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("at byte ", pos_, ": ", what));
  }
  // What stands at pos_, for a message: the end, or the character escaped.
  std::string Here() const {
    if (pos_ >= s_.size()) return "the end of the text";
    return absl::StrCat("'", EscapeText(s_.substr(pos_, 1)), "'");
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  const absl::string_view s_;
  const JsonLimits limits_;
  size_t pos_ = 0;
  int64_t values_ = 0;
};

absl::Status JsonParser::Value(JsonValue* out, int depth) {
  if (pos_ >= s_.size()) return Error("a value is missing");
  if (++values_ > limits_.max_values) {
    return Error(absl::StrCat("more than ", limits_.max_values, " values"));
  }
  switch (s_[pos_]) {
    case '[':
    case '{':
      return Nested(out, depth);
    case '"':
      out->type = JsonValue::Type::kString;
      return String(&out->text);
    case 't':
      out->boolean = true;
      return Literal("true", out);
    case 'f':
      return Literal("false", out);
    case 'n':
      return Literal("null", out);
    default:
      return Number(out);
  }
}

absl::Status JsonParser::Nested(JsonValue* out, int depth) {
  if (depth >= limits_.max_depth) {
    return Error(absl::StrCat("arrays and objects nest deeper than ",
                              limits_.max_depth, " levels"));
  }
  return s_[pos_] == '[' ? Array(out, depth + 1) : Object(out, depth + 1);
}

absl::Status JsonParser::Array(JsonValue* out, int depth) {
  out->type = JsonValue::Type::kArray;
  ++pos_;  // '['
  SkipSpace();
  if (Eat(']')) return absl::OkStatus();
  while (true) {
    out->array.emplace_back();
    RETURN_IF_ERROR(Value(&out->array.back(), depth));
    SkipSpace();
    if (Eat(']')) return absl::OkStatus();
    if (!Eat(',')) {
      return Error(absl::StrCat("',' or ']' expected, not ", Here()));
    }
    SkipSpace();
  }
}

absl::Status JsonParser::Object(JsonValue* out, int depth) {
  out->type = JsonValue::Type::kObject;
  ++pos_;  // '{'
  SkipSpace();
  if (Eat('}')) return absl::OkStatus();
  absl::flat_hash_set<std::string> keys;
  while (true) {
    if (pos_ >= s_.size() || s_[pos_] != '"') {
      return Error(absl::StrCat("a key (a string) expected, not ", Here()));
    }
    const size_t key_at = pos_;
    std::string key;
    RETURN_IF_ERROR(String(&key));
    if (!keys.insert(key).second) {
      pos_ = key_at;
      return Error(absl::StrCat("the key \"", EscapeText(key, 200),
                                "\" appears twice in one object"));
    }
    SkipSpace();
    if (!Eat(':')) return Error(absl::StrCat("':' expected, not ", Here()));
    SkipSpace();
    out->object.emplace_back(std::move(key), JsonValue());
    RETURN_IF_ERROR(Value(&out->object.back().second, depth));
    SkipSpace();
    if (Eat('}')) return absl::OkStatus();
    if (!Eat(',')) {
      return Error(absl::StrCat("',' or '}' expected, not ", Here()));
    }
    SkipSpace();
  }
}

absl::Status JsonParser::String(std::string* out) {
  ++pos_;  // '"'
  while (true) {
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\' &&
           static_cast<uint8_t>(s_[pos_]) >= 0x20) {
      ++pos_;
    }
    out->append(s_.data() + start, pos_ - start);
    if (pos_ >= s_.size()) return Error("a string is not terminated");
    if (s_[pos_] == '"') {
      ++pos_;
      return absl::OkStatus();
    }
    if (s_[pos_] != '\\') {
      return Error("a control character inside a string (escape it)");
    }
    RETURN_IF_ERROR(Escape(out));
  }
}

// The escape sequence at pos_ (a backslash), decoded onto *out.
absl::Status JsonParser::Escape(std::string* out) {
  ++pos_;  // '\\'
  if (pos_ >= s_.size()) return Error("a string is not terminated");
  const char c = s_[pos_++];
  switch (c) {
    case '"':
    case '\\':
    case '/':
      *out += c;
      return absl::OkStatus();
    case 'b':
      *out += '\b';
      return absl::OkStatus();
    case 'f':
      *out += '\f';
      return absl::OkStatus();
    case 'n':
      *out += '\n';
      return absl::OkStatus();
    case 'r':
      *out += '\r';
      return absl::OkStatus();
    case 't':
      *out += '\t';
      return absl::OkStatus();
    case 'u':
      break;
    default:
      --pos_;
      return Error(absl::StrCat("a backslash before ", Here(),
                                ", which is no JSON escape"));
  }
  uint32_t code = 0;
  RETURN_IF_ERROR(Hex4(&code));
  if (code >= 0xdc00 && code <= 0xdfff) return Error("a lone low surrogate");
  if (code >= 0xd800 && code <= 0xdbff) {
    uint32_t low = 0;
    if (!Eat('\\') || !Eat('u')) return Error("a lone high surrogate");
    RETURN_IF_ERROR(Hex4(&low));
    if (low < 0xdc00 || low > 0xdfff) return Error("a lone high surrogate");
    code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
  }
  AppendUtf8(code, out);
  return absl::OkStatus();
}

absl::Status JsonParser::Hex4(uint32_t* out) {
  for (int i = 0; i < 4; ++i, ++pos_) {
    const char c = pos_ < s_.size() ? s_[pos_] : '\0';
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return Error("\\u wants four hex digits");
    *out = *out << 4 | digit;
  }
  return absl::OkStatus();
}

absl::Status JsonParser::Number(JsonValue* out) {
  const size_t start = pos_;
  const auto digits = [&] {
    const size_t from = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    return pos_ > from;
  };
  Eat('-');
  if (!Eat('0') && !digits()) {
    pos_ = start;
    return Error(absl::StrCat("a value expected, not ", Here()));
  }
  if (Eat('.') && !digits()) return Error("a digit expected after '.'");
  if (Eat('e') || Eat('E')) {
    if (!Eat('+')) Eat('-');
    if (!digits()) return Error("a digit expected in the exponent");
  }
  out->type = JsonValue::Type::kNumber;
  out->text = std::string(s_.substr(start, pos_ - start));
  // Locale-independent; out of range becomes an infinity, which the
  // callers bound as they bound any number.
  if (!absl::SimpleAtod(out->text, &out->number)) {
    return Error(absl::StrCat("not a number: ", out->text));
  }
  return absl::OkStatus();
}

absl::Status JsonParser::Literal(absl::string_view word, JsonValue* out) {
  if (s_.substr(pos_, word.size()) != word) {
    return Error(absl::StrCat("a value expected, not ", Here()));
  }
  pos_ += word.size();
  out->type = word == "null" ? JsonValue::Type::kNull : JsonValue::Type::kBool;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JsonValue> ParseJson(absl::string_view text,
                                    const JsonLimits& limits) {
  return JsonParser(text, limits).Document();
}

}  // namespace cohort
