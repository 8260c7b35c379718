#include "worker/exchange/compression.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/comm/half_codec.h"

namespace cohort {

std::unique_ptr<BucketCodec> MakeBucketCodec(const CompressionSpec& spec,
                                             uint64_t seed,
                                             std::vector<FlatTensor> tensors,
                                             int64_t count,
                                             int local_replicas) {
  switch (spec.kind()) {
    case CompressionSpec::FP16:
      return std::make_unique<HalfCodec>(HalfFormat::kFp16);
    case CompressionSpec::BF16:
      return std::make_unique<HalfCodec>(HalfFormat::kBf16);
    case CompressionSpec::POWERSGD: {
      PowerSgdOptions o;
      o.rank = spec.rank();
      o.warmup_steps = spec.warmup_steps();
      o.min_compression_rate = spec.min_compression_rate();
      o.seed = seed;
      o.local_replicas = local_replicas;
      return std::make_unique<PowerSgdCodec>(o, std::move(tensors), count);
    }
    default:
      return nullptr;
  }
}

std::string DescribeCompression(const CompressionSpec& spec) {
  if (spec.kind() != CompressionSpec::POWERSGD) {
    return CompressionSpec::Kind_Name(spec.kind());
  }
  return absl::StrCat("POWERSGD rank ", spec.rank(), " from step ",
                      spec.warmup_steps() + 1, " (min_compression_rate ",
                      spec.min_compression_rate(), ")");
}

}  // namespace cohort
