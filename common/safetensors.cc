#include "common/safetensors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"

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

}  // namespace cohort
