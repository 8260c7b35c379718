#include "common/zeroed_memory.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// Every size class: small (malloc), at the mapping threshold, and mapped
// blocks that are not a whole number of pages or of huge pages.
class ZeroedMemoryTest : public ::testing::TestWithParam<size_t> {};

TEST_P(ZeroedMemoryTest, IsZeroAlignedAndWritable) {
  const size_t bytes = GetParam();
  auto* p = static_cast<unsigned char*>(AllocateZeroed(bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  size_t nonzero = 0;
  for (size_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  std::memset(p, 0xab, bytes);  // the whole block is ours to write
  EXPECT_EQ(p[bytes - 1], 0xab);
  FreeZeroed(p, bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, ZeroedMemoryTest,
    ::testing::Values(size_t{1}, size_t{4097}, kMappedBlockBytes - 1,
                      kMappedBlockBytes, kMappedBlockBytes + 4093,
                      size_t{5} * kMappedBlockBytes + 123));

TEST(ZeroedMemory, ReusedSmallBlocksAreZeroAgain) {
  for (int round = 0; round < 3; ++round) {
    auto* p = static_cast<unsigned char*>(AllocateZeroed(1000));
    ASSERT_NE(p, nullptr);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0) << "round " << round;
    std::memset(p, 0xff, 1000);
    FreeZeroed(p, 1000);
  }
}

TEST(ZeroedMemory, ZeroBytesIsNullAndFreeingNullIsHarmless) {
  EXPECT_EQ(AllocateZeroed(0), nullptr);
  FreeZeroed(nullptr, 0);
  FreeZeroed(nullptr, kMappedBlockBytes);
}

}  // namespace
}  // namespace cohort
