// CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78), the
// checksum iSCSI, ext4 and LevelDB use; cohort uses it to detect corrupted
// checkpoint files, and masked (below) in TensorBoard's event files.
//
// Crc32c uses the SSE4.2 crc32 instruction when the CPU has it (checked once
// at run time) and a slicing-by-8 table otherwise; both give identical
// results. All functions are pure and thread-safe.
#ifndef COHORT_COMMON_CRC32C_H_
#define COHORT_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace cohort {

// CRC32C of `n` bytes at `data`. Pass a previous result as `crc` to extend
// it: Crc32c(b, nb, Crc32c(a, na)) == CRC32C of a followed by b. An empty
// input returns `crc` unchanged (0 for the default).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// A CRC as TFRecord files (TensorBoard's event files) and LevelDB store it:
// rotated right by 15 bits plus a constant, because the CRC of data that
// itself holds CRCs is weak. UnmaskCrc32c undoes it.
inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

namespace crc32c_internal {

// The two implementations behind Crc32c, exposed so tests can compare them.
// Crc32cHardware may only be called when HaveHardwareCrc32c() is true.
uint32_t Crc32cSoftware(const void* data, size_t n, uint32_t crc);
uint32_t Crc32cHardware(const void* data, size_t n, uint32_t crc);
bool HaveHardwareCrc32c();

}  // namespace crc32c_internal
}  // namespace cohort

#endif  // COHORT_COMMON_CRC32C_H_
