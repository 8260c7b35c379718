// The compression block (JobSpec.compression).
#include <string>

#include "absl/strings/str_cat.h"
#include "common/spec_scope.h"
#include "common/status_macros.h"

namespace cohort {
namespace spec_internal {

absl::Status CheckCompression(const JobSpec& j, const Scope& js) {
  if (!j.has_compression()) return absl::OkStatus();
  const CompressionSpec& c = j.compression();
  const Scope s = js.Nested(j, "compression", -1);
  const bool power = c.kind() == CompressionSpec::POWERSGD;
  const std::string kind = CompressionSpec::Kind_Name(c.kind());
  RETURN_IF_ERROR(
      OnlyFor(power, c.rank() != 0, s, c, "rank", "POWERSGD", kind));
  RETURN_IF_ERROR(OnlyFor(power, c.has_warmup_steps(), s, c, "warmup_steps",
                          "POWERSGD", kind));
  RETURN_IF_ERROR(OnlyFor(power, c.has_min_compression_rate(), s, c,
                          "min_compression_rate", "POWERSGD", kind));
  if (power && j.mode() == PS) {
    return s.Error(c, "kind", -1,
                   "POWERSGD compresses the all-reduce exchange; in mode PS "
                   "the shards take FP16 or BF16 pushes (or none)");
  }
  if (!power) return absl::OkStatus();
  // Unset fields take PyTorch's defaults (FillJobDefaults).
  RETURN_IF_ERROR(Require(c.rank() >= 0 && c.rank() <= 1024, s, c, "rank",
                          "in [1, 1024]", c.rank()));
  RETURN_IF_ERROR(NonNegative(s, c, "warmup_steps", c.warmup_steps()));
  return Require(!c.has_min_compression_rate() || c.min_compression_rate() > 0,
                 s, c, "min_compression_rate", "> 0", c.min_compression_rate());
}

}  // namespace spec_internal
}  // namespace cohort
