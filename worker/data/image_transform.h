// The image folder's augmentation and preprocessing, as torchvision 0.14
// defines them, fused into one pass from decoded pixels to the model's
// normalised CHW floats:
//   training:   RandomResizedCrop(size, scale, ratio), RandomHorizontalFlip,
//               ToTensor, Normalize(mean, std)
//   evaluation: Resize(resize), CenterCrop(size), ToTensor, Normalize
//
// A crop and a resize are both an affine map from output pixels to stored
// pixels (a Sampling); the output is sampled once, bilinearly (half-pixel
// centres, edges clamped, as torch's align_corners=False), straight from the
// decoded image. There is no antialiasing: PIL widens its filter when it
// shrinks, this does not. The decoder's DCT scaling (image_decode.h) takes
// over shrinks of 2x and more, so what remains is a shrink under 2x, where
// bilinear sampling aliases little; the pixels differ slightly from
// torchvision's, the distributions of crops do not.
//
// Thread safety: pure functions.
#ifndef COHORT_WORKER_DATA_IMAGE_TRANSFORM_H_
#define COHORT_WORKER_DATA_IMAGE_TRANSFORM_H_

#include <cstdint>

#include "worker/data/image_decode.h"
#include "worker/data/splitmix.h"

namespace cohort {

// A rectangle of stored pixels: torchvision's (top = y, left = x, height,
// width).
struct CropBox {
  int x = 0, y = 0, width = 0, height = 0;
  bool operator==(const CropBox& o) const {
    return x == o.x && y == o.y && width == o.width && height == o.height;
  }
};

struct CropParams {
  float scale_min = 0.08f, scale_max = 1.0f;
  float ratio_min = 3.0f / 4, ratio_max = 4.0f / 3;
};

// RandomResizedCrop.get_params of torchvision 0.14 on a width x height
// image, drawing from `rng`: up to 10 attempts of an area uniform in
// [scale_min, scale_max] x the image's area and an aspect ratio
// log-uniform in [ratio_min, ratio_max] (sides rounded half to even, as
// Python's round), the first that fits placed uniformly; else the center
// crop of the whole image clamped to the ratio range.
CropBox RandomResizedCropBox(int width, int height, const CropParams& params,
                             SplitMix64& rng);

// Output pixel (ox, oy) of a size x size sample reads stored pixel
// (x0 + dx * ox, y0 + dy * oy), in pixel-centre coordinates; with `flip`
// the output is mirrored left to right.
struct Sampling {
  double x0 = 0, dx = 1, y0 = 0, dy = 1;
  bool flip = false;
};

// `box` resized to size x size.
Sampling CropSampling(const CropBox& box, int size);

// The shorter side resized to `resize` (the longer one to
// int(resize * long / short)), then the center size x size square
// (offsets rounded as torchvision's CenterCrop).
Sampling CenterSampling(int width, int height, int resize, int size);

// The stored pixels `s` reads for a size x size sample of a width x height
// image (one more on each side for the bilinear neighbours), and how much
// the decoder may shrink it: the largest of 1, 2, 4, 8 not above the
// sampling's step in both directions, so the decoded crop is still shrunk
// (never enlarged) to the output.
ImageRegion RegionFor(const Sampling& s, int size, int width, int height);

// Per-channel (x / 255 - mean) / std as x * scale + bias.
struct Normalization {
  float scale[3] = {1, 1, 1};
  float bias[3] = {0, 0, 0};
};
Normalization MakeNormalization(const float* mean, const float* std,
                                int channels);

// Writes the image.channels x size x size sample `s` of `image` to `out`,
// normalised.
void SampleImage(const DecodedImage& image, const Sampling& s, int size,
                 const Normalization& norm, float* out);

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_IMAGE_TRANSFORM_H_
