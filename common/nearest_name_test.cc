#include "common/nearest_name.h"

#include "gtest/gtest.h"

namespace cohort {
namespace {

TEST(EditDistance, CountsEdits) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("dir", "dirr"), 1);
  EXPECT_EQ(EditDistance("epochs", "epoch"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("Batch_Size", "batch_size"), 0);
}

TEST(NearestName, FindsSlips) {
  const std::vector<std::string> conv = {"out_channels", "kernel", "stride",
                                         "padding",      "groups", "dilation"};
  EXPECT_EQ(NearestName("kernel_size", conv), "kernel");
  EXPECT_EQ(NearestName("strides", conv), "stride");
  EXPECT_EQ(NearestName("out_channel", conv), "out_channels");
  EXPECT_EQ(NearestName("dialation", conv), "dilation");
}

TEST(NearestName, NamesNothingFarOff) {
  const std::vector<std::string> flags = {"epochs", "max-steps", "job"};
  EXPECT_EQ(NearestName("learning-rate", flags), "");
  EXPECT_EQ(NearestName("x", flags), "");
  // The prefix rule wants three letters.
  EXPECT_EQ(NearestName("ma", {"max-steps"}), "");
}

TEST(NearestName, PrefersFewestEdits) {
  EXPECT_EQ(NearestName("epoch", {"epochs", "epoch_steps"}), "epochs");
}

}  // namespace
}  // namespace cohort
