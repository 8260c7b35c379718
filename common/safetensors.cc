#include "common/safetensors.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/half.h"
#include "common/json.h"
#include "common/quote.h"
#include "common/status_macros.h"

namespace cohort {

std::string SafetensorsBytes(
    const std::vector<SafeTensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::string header = "{\"__metadata__\": {";
  bool first = true;
  for (const auto& [key, value] : metadata) {
    absl::StrAppend(&header, first ? "" : ", ", JsonString(key), ": ",
                    JsonString(value));
    first = false;
  }
  header += "}";
  uint64_t offset = 0;
  for (const SafeTensor& t : tensors) {
    absl::StrAppend(&header, ", ", JsonString(t.name), ": {\"dtype\": \"",
                    t.dtype, "\", \"shape\": [", absl::StrJoin(t.shape, ", "),
                    "], \"data_offsets\": [", offset, ", ",
                    offset + t.bytes.size(), "]}");
    offset += t.bytes.size();
  }
  header += "}";
  // The data that follows starts 8-byte aligned, so readers may map it.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + header.size() + offset);
  for (int i = 0; i < 8; ++i) {
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  out += header;
  for (const SafeTensor& t : tensors) out += t.bytes;
  return out;
}

namespace {

absl::Status Bad(const std::string& path, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(QuoteName(path), ": not a valid safetensors file: ", why));
}

// A tensor's name as a message shows it: quoted, escaped, cut if long.
std::string Named(absl::string_view name) {
  return absl::StrCat("\"", EscapeText(name, 200), "\"");
}

int ItemBytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") {
    return 2;
  }
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

// The product of the item size and the dimensions, or false for a shape
// that is not a list of non-negative integers or whose size overflows.
bool ShapeBytes(const JsonValue& shape, int item, SafeTensor* t,
                uint64_t* bytes) {
  if (shape.type != JsonValue::Type::kArray) return false;
  *bytes = item;
  for (const JsonValue& d : shape.array) {
    uint64_t x = 0;
    if (!d.AsUint64(&x) || x > uint64_t{1000000000000000} ||
        __builtin_mul_overflow(*bytes, x, bytes)) {
      return false;
    }
    t->shape.push_back(static_cast<int64_t>(x));
  }
  return true;
}

// A data offset as written: a JSON number's text is only digits, signs, '.'
// and exponents, safe to show.
std::string OffsetText(const JsonValue& v) {
  return v.type == JsonValue::Type::kNumber ? v.text.substr(0, 40) : "?";
}

// Where a tensor's bytes lie in the data: [begin, end).
struct Span {
  uint64_t begin = 0, end = 0;
};

// One tensor entry of the header; *span is where its bytes lie.
absl::StatusOr<SafeTensor> Entry(const std::string& name, const JsonValue& v,
                                 absl::string_view data,
                                 const std::string& path, Span* span) {
  const JsonValue* dtype = v.Find("dtype");
  const JsonValue* shape = v.Find("shape");
  const JsonValue* offsets = v.Find("data_offsets");
  if (dtype == nullptr || shape == nullptr || offsets == nullptr ||
      dtype->type != JsonValue::Type::kString ||
      offsets->type != JsonValue::Type::kArray || offsets->array.size() != 2) {
    return Bad(path, absl::StrCat("tensor ", Named(name),
                                  " lacks dtype, shape or data_offsets"));
  }
  SafeTensor t;
  t.name = name;
  t.dtype = dtype->text;
  const int item = ItemBytes(t.dtype);
  if (item == 0) {
    return Bad(path, absl::StrCat("tensor ", Named(name), " has unknown dtype ",
                                  Named(t.dtype)));
  }
  uint64_t want = 0;
  if (!ShapeBytes(*shape, item, &t, &want)) {
    return Bad(path, absl::StrCat("tensor ", Named(name), " has a bad shape"));
  }
  if (!offsets->array[0].AsUint64(&span->begin) ||
      !offsets->array[1].AsUint64(&span->end) || span->end < span->begin ||
      span->end > data.size() || span->end - span->begin != want) {
    return Bad(
        path,
        absl::StrCat("tensor ", Named(name), "'s data_offsets [",
                     OffsetText(offsets->array[0]), ", ",
                     OffsetText(offsets->array[1]), "] do not hold its ", want,
                     " bytes inside the ", data.size(), " bytes of data"));
  }
  t.bytes = std::string(data.substr(span->begin, want));
  return t;
}

// Every value of "__metadata__" must be a string, as the format says.
absl::Status ReadMetadata(const JsonValue& v, const std::string& path,
                          std::map<std::string, std::string>* out) {
  if (v.type != JsonValue::Type::kObject) {
    return Bad(path, "__metadata__ is not an object");
  }
  for (const auto& [k, value] : v.object) {
    if (value.type != JsonValue::Type::kString) {
      return Bad(path, absl::StrCat("__metadata__ value ", Named(k),
                                    " is not a string"));
    }
    (*out)[k] = value.text;
  }
  return absl::OkStatus();
}

// Two tensors sharing bytes would alias each other's weights: refused.
absl::Status CheckNoOverlap(std::vector<std::pair<Span, std::string>> spans,
                            const std::string& path) {
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
    return a.first.begin < b.first.begin;
  });
  const std::pair<Span, std::string>* last = nullptr;
  for (const auto& s : spans) {
    if (s.first.begin == s.first.end) continue;  // empty: shares no byte
    if (last != nullptr && s.first.begin < last->first.end) {
      return Bad(
          path, absl::StrCat("tensors ", Named(last->second), " [",
                             last->first.begin, ", ", last->first.end, ") and ",
                             Named(s.second), " [", s.first.begin, ", ",
                             s.first.end, ") overlap in the data"));
    }
    if (last == nullptr || s.first.end > last->first.end) last = &s;
  }
  return absl::OkStatus();
}

// The header's JSON; `n` bytes after the length field.
absl::StatusOr<JsonValue> ReadHeader(const std::string& bytes,
                                     const std::string& path, uint64_t* n) {
  if (bytes.size() < 8) return Bad(path, "shorter than its 8-byte length");
  *n = 0;
  for (int i = 7; i >= 0; --i) {
    *n = *n << 8 | static_cast<unsigned char>(bytes[i]);
  }
  if (*n > bytes.size() - 8 || *n > (uint64_t{100} << 20)) {
    return Bad(path, absl::StrCat("a header of ", *n, " bytes in a file of ",
                                  bytes.size()));
  }
  absl::StatusOr<JsonValue> header =
      ParseJson(absl::string_view(bytes).substr(8, *n));
  if (!header.ok()) {
    return Bad(path, absl::StrCat("its JSON header is malformed ",
                                  header.status().message()));
  }
  if (header->type != JsonValue::Type::kObject) {
    return Bad(path, "its header is not a JSON object");
  }
  return header;
}

}  // namespace

absl::StatusOr<SafetensorsFile> ParseSafetensors(const std::string& bytes,
                                                 const std::string& path) {
  uint64_t n = 0;
  ASSIGN_OR_RETURN(const JsonValue header, ReadHeader(bytes, path, &n));
  const absl::string_view data = absl::string_view(bytes).substr(8 + n);
  SafetensorsFile file;
  std::vector<std::pair<Span, std::string>> spans;
  for (const auto& [name, value] : header.object) {
    if (name == "__metadata__") {
      RETURN_IF_ERROR(ReadMetadata(value, path, &file.metadata));
      continue;
    }
    Span span;
    ASSIGN_OR_RETURN(SafeTensor t, Entry(name, value, data, path, &span));
    spans.emplace_back(span, name);
    file.tensors[name] = std::move(t);
  }
  RETURN_IF_ERROR(CheckNoOverlap(std::move(spans), path));
  return file;
}

absl::StatusOr<std::vector<float>> SafeTensorFloats(const SafeTensor& t) {
  std::vector<float> out;
  const char* p = t.bytes.data();
  if (t.dtype == "F32") {
    out.resize(t.bytes.size() / 4);
    // A zero-element tensor leaves out.data() null, which memcpy must not
    // be given even for zero bytes.
    if (!out.empty()) std::memcpy(out.data(), p, t.bytes.size());
    return out;
  }
  if (t.dtype == "F16" || t.dtype == "BF16") {
    out.resize(t.bytes.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      if (t.dtype == "BF16") {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&out[i], &bits, 4);
      } else {
        out[i] = HalfToFloat(h);
      }
    }
    return out;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tensor ", Named(t.name), " is ", Named(t.dtype),
                   "; weights must be F32, F16 or BF16"));
}

}  // namespace cohort
