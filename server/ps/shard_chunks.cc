// ChunkAssembler (shard_state.h): a request's dense chunks into one buffer
// per partition.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ps_limits.h"
#include "common/half_convert.h"
#include "server/ps/shard_state.h"

namespace cohort {
namespace {

// Bytes per element of `encoding`; 0 for one this build does not know.
int64_t ElementBytes(int encoding) {
  switch (encoding) {
    case TensorChunk::FLOAT32:
      return 4;
    case TensorChunk::FLOAT16:
    case TensorChunk::BFLOAT16:
      return 2;
    default:
      return 0;
  }
}

// `n` elements of `data` (checked to hold them) into floats.
void Decode(int encoding, const std::string& data, float* out, int64_t n) {
  if (encoding == TensorChunk::FLOAT32) {
    std::memcpy(out, data.data(), n * 4);
    return;
  }
  // The bytes of a protobuf string need not be aligned for uint16_t, so
  // they pass through a small aligned block on the stack, which stays in L1,
  // rather than a heap copy of the whole chunk.
  const HalfFormat format =
      encoding == TensorChunk::FLOAT16 ? HalfFormat::kFp16 : HalfFormat::kBf16;
  constexpr int64_t kBlock = 2048;
  uint16_t block[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    std::memcpy(block, data.data() + i * 2, m * 2);
    HalfToFloat(format, block, out + i, m);
  }
}

}  // namespace

ChunkAssembler::ChunkAssembler(const std::vector<Partition>& partitions,
                               std::string what,
                               std::vector<std::vector<float>> buffers)
    : what_(std::move(what)) {
  slots_.reserve(partitions.size());
  const bool reuse = buffers.size() == partitions.size();
  for (const Partition& p : partitions) {
    index_[p.id()] = slots_.size();
    Slot s;
    s.partition = p;
    if (reuse) s.values = std::move(buffers[slots_.size()]);
    s.values.resize(p.count());
    slots_.push_back(std::move(s));
  }
}

absl::Status ChunkAssembler::Add(const TensorChunk& chunk) {
  const std::string& data = chunk.data();
  if (static_cast<int64_t>(data.size()) > kMaxChunkBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what_, ": partition ", chunk.partition(),
                     " chunk at offset ", chunk.offset(), " has ", data.size(),
                     " bytes, more than the limit of ", kMaxChunkBytes));
  }
  auto it = index_.find(chunk.partition());
  if (it == index_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": unknown partition ", chunk.partition(),
                     " (this shard does not hold it)"));
  }
  const int64_t width = ElementBytes(chunk.encoding());
  if (width == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what_, ": partition ", chunk.partition(), " chunk at offset ",
        chunk.offset(), " has unknown encoding ", chunk.encoding()));
  }
  if (static_cast<int64_t>(data.size()) % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": partition ", chunk.partition(),
                     " chunk at offset ", chunk.offset(), " has ", data.size(),
                     " bytes, not a multiple of ", width));
  }
  Slot& s = slots_[it->second];
  const int64_t n = data.size() / width;
  // Compared without adding, so that no offset can overflow.
  if (chunk.offset() < 0 || chunk.offset() > s.partition.count() - n) {
    return absl::InvalidArgumentError(absl::StrCat(
        what_, ": partition ", chunk.partition(), " chunk of ", n,
        " elements at offset ", chunk.offset(),
        " lies outside the partition's ", s.partition.count(), " elements"));
  }
  Decode(chunk.encoding(), data, s.values.data() + chunk.offset(), n);
  s.covered.emplace_back(chunk.offset(), chunk.offset() + n);
  bytes_ += data.size();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> ChunkAssembler::Finish() {
  std::vector<std::vector<float>> out;
  out.reserve(slots_.size());
  for (Slot& s : slots_) {
    std::sort(s.covered.begin(), s.covered.end());
    int64_t next = 0;
    for (const auto& [begin, end] : s.covered) {
      if (begin == end) continue;
      if (begin < next) {
        return absl::InvalidArgumentError(
            absl::StrCat(what_, ": partition ", s.partition.id(), " element ",
                         begin, " is covered twice"));
      }
      if (begin > next) break;
      next = end;
    }
    if (next != s.partition.count()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": partition ", s.partition.id(), " element ",
                       next, " is not covered"));
    }
    out.push_back(std::move(s.values));
  }
  slots_.clear();
  return out;
}

}  // namespace cohort
