#include "common/safetensors.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/half.h"
#include "common/json.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

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
      absl::StrCat(path, ": not a valid safetensors file: ", why));
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

// One tensor entry of the header.
absl::StatusOr<SafeTensor> Entry(const std::string& name,
                                 const google::protobuf::Value& v,
                                 absl::string_view data,
                                 const std::string& path) {
  const auto& f = v.struct_value().fields();
  auto dtype = f.find("dtype"), shape = f.find("shape"),
       offsets = f.find("data_offsets");
  if (dtype == f.end() || shape == f.end() || offsets == f.end() ||
      offsets->second.list_value().values_size() != 2) {
    return Bad(path, absl::StrCat("tensor ", name,
                                  " lacks dtype, shape or data_offsets"));
  }
  SafeTensor t;
  t.name = name;
  t.dtype = dtype->second.string_value();
  const int item = ItemBytes(t.dtype);
  if (item == 0) {
    return Bad(path,
               absl::StrCat("tensor ", name, " has unknown dtype ", t.dtype));
  }
  uint64_t want = item;
  for (const auto& d : shape->second.list_value().values()) {
    const double x = d.number_value();
    if (x < 0 || x > 1e15 ||
        x != static_cast<double>(static_cast<int64_t>(x)) ||
        __builtin_mul_overflow(want, static_cast<uint64_t>(x), &want)) {
      return Bad(path, absl::StrCat("tensor ", name, " has a bad shape"));
    }
    t.shape.push_back(static_cast<int64_t>(x));
  }
  const double begin = offsets->second.list_value().values(0).number_value();
  const double end = offsets->second.list_value().values(1).number_value();
  if (begin < 0 || end < begin || end > static_cast<double>(data.size()) ||
      static_cast<uint64_t>(end - begin) != want) {
    return Bad(path, absl::StrCat("tensor ", name, "'s data_offsets [", begin,
                                  ", ", end, "] do not hold its ", want,
                                  " bytes inside the ", data.size(),
                                  " bytes of data"));
  }
  t.bytes = std::string(data.substr(static_cast<size_t>(begin), want));
  return t;
}

}  // namespace

absl::StatusOr<SafetensorsFile> ParseSafetensors(const std::string& bytes,
                                                 const std::string& path) {
  if (bytes.size() < 8) return Bad(path, "shorter than its 8-byte length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = n << 8 | static_cast<unsigned char>(bytes[i]);
  }
  if (n > bytes.size() - 8 || n > (uint64_t{100} << 20)) {
    return Bad(path, absl::StrCat("a header of ", n, " bytes in a file of ",
                                  bytes.size()));
  }
  google::protobuf::Struct header;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(bytes.substr(8, n), &header);
  if (!parsed.ok()) {
    return Bad(path, absl::StrCat("its header is not a JSON object: ",
                                  parsed.message().as_string()));
  }
  const absl::string_view data = absl::string_view(bytes).substr(8 + n);
  SafetensorsFile file;
  for (const auto& [name, value] : header.fields()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : value.struct_value().fields()) {
        file.metadata[k] = v.string_value();
      }
      continue;
    }
    absl::StatusOr<SafeTensor> t = Entry(name, value, data, path);
    if (!t.ok()) return t.status();
    file.tensors[name] = *std::move(t);
  }
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
      absl::StrCat("tensor ", t.name, " is ", t.dtype,
                   "; weights must be F32, F16 or BF16"));
}

}  // namespace cohort
