#include "worker/data/image_transform.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace cohort {
namespace {

// torchvision 0.14's RandomResizedCrop.get_params written out plainly, with
// the same draws (uniform in [0, 1) from 53 bits, randint as x mod n).
CropBox ReferenceBox(int width, int height, double smin, double smax,
                     double rmin, double rmax, uint64_t seed) {
  SplitMix64 rng(seed);
  auto uniform = [&](double a, double b) {
    return a + (b - a) *
                   (static_cast<double>(rng.Next() >> 11) / 9007199254740992.0);
  };
  const double area = double(width) * height;
  for (int i = 0; i < 10; ++i) {
    const double target_area = area * uniform(smin, smax);
    const double aspect = std::exp(uniform(std::log(rmin), std::log(rmax)));
    const int w = int(std::nearbyint(std::sqrt(target_area * aspect)));
    const int h = int(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int top = int(rng.Next() % uint64_t(height - h + 1));
      const int left = int(rng.Next() % uint64_t(width - w + 1));
      return {left, top, w, h};
    }
  }
  const double in_ratio = double(width) / height;
  int w = width, h = height;
  if (in_ratio < rmin) {
    h = int(std::nearbyint(w / rmin));
  } else if (in_ratio > rmax) {
    w = int(std::nearbyint(h * rmax));
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

TEST(RandomResizedCrop, MatchesTheReferenceForManyDraws) {
  const CropParams p;
  int fits = 0;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    const int w = 20 + seed % 480, h = 30 + (seed * 7) % 300;
    SplitMix64 rng(seed);
    const CropBox box = RandomResizedCropBox(w, h, p, rng);
    ASSERT_EQ(box, ReferenceBox(w, h, 0.08, 1.0, 3.0 / 4, 4.0 / 3, seed))
        << seed;
    ASSERT_GE(box.x, 0);
    ASSERT_GE(box.y, 0);
    ASSERT_LE(box.x + box.width, w);
    ASSERT_LE(box.y + box.height, h);
    const double area = double(box.width) * box.height / (double(w) * h);
    fits += area >= 0.07 && area <= 1.0;
  }
  EXPECT_GT(fits, 1900);
}

// Known boxes for given draws, so a change of the draw order shows.
TEST(RandomResizedCrop, KnownBoxes) {
  const CropParams p;
  SplitMix64 a(42);
  const CropBox box = RandomResizedCropBox(500, 375, p, a);
  EXPECT_EQ(box, ReferenceBox(500, 375, 0.08, 1.0, 0.75, 4.0 / 3, 42));
  // Nothing fits: the center crop clamped to the ratio range.
  CropParams wide;
  wide.scale_min = wide.scale_max = 1.0f;
  wide.ratio_min = 2.0f;
  wide.ratio_max = 3.0f;
  SplitMix64 b(7);
  EXPECT_EQ(RandomResizedCropBox(100, 100, wide, b), (CropBox{0, 25, 100, 50}));
  CropParams tall = wide;
  tall.ratio_min = 0.25f;
  tall.ratio_max = 0.5f;
  SplitMix64 c(7);
  EXPECT_EQ(RandomResizedCropBox(100, 100, tall, c), (CropBox{25, 0, 50, 100}));
  CropParams square = wide;
  square.ratio_min = square.ratio_max = 1.0f;
  square.scale_min = square.scale_max = 1.0f;
  SplitMix64 d(7);
  // The whole 3x3 image.
  EXPECT_EQ(RandomResizedCropBox(3, 3, square, d), (CropBox{0, 0, 3, 3}));
}

TEST(CenterSampling, MatchesTorchvisionResizeAndCenterCrop) {
  // 500x375: resized to 341x256 (int(256 * 500 / 375)), the crop's left
  // edge round(58.5) = 58 (half to even) and top 16.
  const Sampling s = CenterSampling(500, 375, 256, 224);
  EXPECT_DOUBLE_EQ(s.dx, 500.0 / 341);
  EXPECT_DOUBLE_EQ(s.dy, 375.0 / 256);
  EXPECT_DOUBLE_EQ(s.x0, 58.5 * 500.0 / 341 - 0.5);
  EXPECT_DOUBLE_EQ(s.y0, 16.5 * 375.0 / 256 - 0.5);
  EXPECT_FALSE(s.flip);
  const Sampling t = CenterSampling(300, 600, 256, 224);  // portrait
  EXPECT_DOUBLE_EQ(t.dx, 300.0 / 256);
  EXPECT_DOUBLE_EQ(t.dy, 600.0 / 512);
}

DecodedImage Gradient(int w, int h, int channels) {
  DecodedImage d;
  d.stored_width = d.scaled_width = d.width = w;
  d.stored_height = d.scaled_height = d.height = h;
  d.channels = channels;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        d.pixels.push_back(static_cast<uint8_t>(x * 10 + y + c * 50));
      }
    }
  }
  return d;
}

TEST(SampleImage, IdentityCropAndFlipAreExact) {
  const DecodedImage d = Gradient(8, 8, 3);
  const float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
  const Normalization n = MakeNormalization(mean, std, 3);
  std::vector<float> out(3 * 64), flipped(3 * 64);
  Sampling s = CropSampling({0, 0, 8, 8}, 8);
  SampleImage(d, s, 8, n, out.data());
  s.flip = true;
  SampleImage(d, s, 8, n, flipped.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 8; ++y) {
      for (int x = 0; x < 8; ++x) {
        const float want = (x * 10 + y + c * 50) / 255.0f;
        ASSERT_FLOAT_EQ(out[c * 64 + y * 8 + x], want);
        ASSERT_FLOAT_EQ(flipped[c * 64 + y * 8 + (7 - x)], want);
      }
    }
  }
}

TEST(SampleImage, ConstantImageNormalisesToTheExpectedConstant) {
  DecodedImage d = Gradient(30, 20, 3);
  for (uint8_t& v : d.pixels) v = 128;
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float std[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> out(3 * 16 * 16);
  SplitMix64 rng(3);
  Sampling s = CropSampling(RandomResizedCropBox(30, 20, {}, rng), 16);
  SampleImage(d, s, 16, MakeNormalization(mean, std, 3), out.data());
  for (int c = 0; c < 3; ++c) {
    const float want = (128 / 255.0f - mean[c]) / std[c];
    for (int i = 0; i < 256; ++i) ASSERT_NEAR(out[c * 256 + i], want, 1e-5);
  }
}

// Halving a 2x2 block pattern samples between the pixels: the average.
TEST(SampleImage, BilinearDownscaleAverages) {
  DecodedImage d = Gradient(4, 4, 1);
  for (int i = 0; i < 16; ++i) d.pixels[i] = (i % 2) ? 200 : 100;
  const float mean[1] = {0}, std[1] = {1.0f / 255};
  std::vector<float> out(4);
  SampleImage(d, CropSampling({0, 0, 4, 4}, 2), 2,
              MakeNormalization(mean, std, 1), out.data());
  for (float v : out) EXPECT_FLOAT_EQ(v, 150);
}

// A shrunk decode is addressed in stored pixels all the same.
TEST(SampleImage, ShrunkAndPartialDecodesMapBack) {
  DecodedImage d = Gradient(8, 8, 1);  // stands for a 16x16 image at 1/2
  d.stored_width = d.stored_height = 16;
  const float mean[1] = {0}, std[1] = {1.0f / 255};
  std::vector<float> out(64);
  SampleImage(d, CropSampling({0, 0, 16, 16}, 8), 8,
              MakeNormalization(mean, std, 1), out.data());
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) ASSERT_FLOAT_EQ(out[y * 8 + x], x * 10 + y);
  }
  // Only the right half was decoded (x = 4..7 of 8).
  DecodedImage right = Gradient(4, 8, 1);
  right.stored_width = right.scaled_width = 8;
  right.x = 4;
  std::vector<float> part(16);
  SampleImage(right, CropSampling({4, 0, 4, 4}, 4), 4,
              MakeNormalization(mean, std, 1), part.data());
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) ASSERT_FLOAT_EQ(part[y * 4 + x], x * 10 + y);
  }
}

TEST(RegionFor, CoversTheSamplesAndAllowsShrinkOnlyWhenDownscaling) {
  // Samples at pixel centres 103.5 + 8k (k < 100) and 52 + 4k: pixels
  // 103..896 and 52..448 are read.
  const Sampling s = CropSampling({100, 50, 800, 400}, 100);
  EXPECT_DOUBLE_EQ(s.x0, 103.5);
  EXPECT_DOUBLE_EQ(s.y0, 51.5);
  ImageRegion r = RegionFor(s, 100, 1000, 600);
  EXPECT_LE(r.x, 103);
  EXPECT_LE(r.y, 51);
  EXPECT_GE(r.x + r.width, 897);
  EXPECT_GE(r.y + r.height, 449);
  EXPECT_EQ(r.max_shrink, 4);  // steps 8 and 4: the smaller
  r = RegionFor(CropSampling({0, 0, 300, 300}, 224), 224, 500, 375);
  EXPECT_EQ(r.max_shrink, 1);
  r = RegionFor(CropSampling({0, 0, 500, 375}, 224), 224, 500, 375);
  EXPECT_EQ(r.max_shrink, 1);  // 1.67x: bilinear, no DCT scaling
  r = RegionFor(CropSampling({0, 0, 3000, 3000}, 224), 224, 4000, 3000);
  EXPECT_EQ(r.max_shrink, 8);
}

}  // namespace
}  // namespace cohort
