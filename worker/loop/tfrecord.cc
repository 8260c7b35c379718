#include "worker/loop/tfrecord.h"

#include <cstdint>

#include "common/crc32c.h"

namespace cohort {
namespace {

// Little-endian, whatever the machine's order.
void PutLittleEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
}

uint32_t MaskedCrc(absl::string_view bytes) {
  return MaskCrc32c(Crc32c(bytes.data(), bytes.size()));
}

}  // namespace

void AppendTfRecord(absl::string_view data, std::string* out) {
  std::string length;
  PutLittleEndian(data.size(), 8, &length);
  out->append(length);
  PutLittleEndian(MaskedCrc(length), 4, out);
  out->append(data.data(), data.size());
  PutLittleEndian(MaskedCrc(data), 4, out);
}

}  // namespace cohort
