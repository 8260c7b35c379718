#include "common/tensor.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(Tensor, OwningTensorIsZeroFilledAndAligned) {
  Tensor t({2, 3, 4});
  EXPECT_EQ(t.size(), 24);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (int64_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i], 0.0f);
  EXPECT_EQ(ShapeString(t.shape()), "[2, 3, 4]");
}

TEST(Tensor, ResizeKeepsStorageWhenLargeEnough) {
  Tensor t({100});
  const float* before = t.data();
  t.Resize({10, 5});
  EXPECT_EQ(t.data(), before);
  EXPECT_EQ(t.size(), 50);
  t.Resize({200});
  EXPECT_EQ(t.size(), 200);
}

TEST(Tensor, ViewSharesMemoryAndCloneDoesNot) {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor v = Tensor::View(buf, {2, 3});
  EXPECT_TRUE(v.is_view());
  v[4] = 50;
  EXPECT_EQ(buf[4], 50);
  Tensor c = v.Clone();
  EXPECT_FALSE(c.is_view());
  c[0] = -1;
  EXPECT_EQ(buf[0], 1);
  EXPECT_EQ(c[4], 50);
}

TEST(Tensor, MoveLeavesSourceEmpty) {
  TensorD a({3});
  a.Fill(2.5);
  TensorD b = std::move(a);
  EXPECT_EQ(b.size(), 3);
  EXPECT_EQ(b[2], 2.5);
  EXPECT_EQ(a.size(), 0);
}

}  // namespace
}  // namespace cohort
