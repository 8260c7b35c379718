#include "worker/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cohort {
namespace {

// Uniform in [lo, hi), 53 bits.
double Uniform(SplitMix64& rng, double lo, double hi) {
  const double u = static_cast<double>(rng.Next() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

// Python's int(round(v)): halves to even (the default rounding mode).
int RoundHalfEven(double v) { return static_cast<int>(std::nearbyint(v)); }

// One axis of a sampling: for each output index, the two source indices in
// the decoded buffer and the weight of the second.
struct Taps {
  std::vector<int> lo, hi;
  std::vector<float> w;
};

// `start`, `step`: the sampling in stored pixels. The decoded buffer holds
// `stored` pixels shrunk to `scaled`, of which it keeps [offset, offset +
// extent).
Taps AxisTaps(double start, double step, int size, int stored, int scaled,
              int offset, int extent) {
  Taps t;
  t.lo.resize(size);
  t.hi.resize(size);
  t.w.resize(size);
  const double ratio = static_cast<double>(scaled) / stored;
  for (int o = 0; o < size; ++o) {
    const double u = start + step * o;  // stored pixel centre
    double v = (u + 0.5) * ratio - 0.5 - offset;
    v = std::clamp(v, 0.0, static_cast<double>(extent - 1));
    const int i = static_cast<int>(v);
    t.lo[o] = i;
    t.hi[o] = std::min(i + 1, extent - 1);
    t.w[o] = static_cast<float>(v - i);
  }
  return t;
}

}  // namespace

CropBox RandomResizedCropBox(int width, int height, const CropParams& p,
                             SplitMix64& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(p.ratio_min), log_max = std::log(p.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * Uniform(rng, p.scale_min, p.scale_max);
    const double ratio = std::exp(Uniform(rng, log_min, log_max));
    const int w = RoundHalfEven(std::sqrt(target * ratio));
    const int h = RoundHalfEven(std::sqrt(target / ratio));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = static_cast<int>(rng.Next() % (height - h + 1));
      const int x = static_cast<int>(rng.Next() % (width - w + 1));
      return {x, y, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < p.ratio_min) {
    h = RoundHalfEven(w / static_cast<double>(p.ratio_min));
  } else if (in_ratio > p.ratio_max) {
    w = RoundHalfEven(h * static_cast<double>(p.ratio_max));
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

Sampling CropSampling(const CropBox& box, int size) {
  Sampling s;
  s.dx = static_cast<double>(box.width) / size;
  s.dy = static_cast<double>(box.height) / size;
  s.x0 = box.x + 0.5 * s.dx - 0.5;
  s.y0 = box.y + 0.5 * s.dy - 0.5;
  return s;
}

Sampling CenterSampling(int width, int height, int resize, int size) {
  // torchvision's _compute_resized_output_size for an int size.
  const bool portrait = width <= height;
  const int shorter = portrait ? width : height;
  const int longer = portrait ? height : width;
  const int new_long =
      static_cast<int>(static_cast<int64_t>(resize) * longer / shorter);
  const int rw = portrait ? resize : new_long;
  const int rh = portrait ? new_long : resize;
  // CenterCrop: int(round((resized - size) / 2.0)).
  const int left = RoundHalfEven((rw - size) / 2.0);
  const int top = RoundHalfEven((rh - size) / 2.0);
  Sampling s;
  s.dx = static_cast<double>(width) / rw;
  s.dy = static_cast<double>(height) / rh;
  s.x0 = (left + 0.5) * s.dx - 0.5;
  s.y0 = (top + 0.5) * s.dy - 0.5;
  return s;
}

ImageRegion RegionFor(const Sampling& s, int size, int width, int height) {
  const double x1 = s.x0 + s.dx * (size - 1), y1 = s.y0 + s.dy * (size - 1);
  ImageRegion r;
  r.x = std::clamp(static_cast<int>(std::floor(s.x0)) - 1, 0, width - 1);
  r.y = std::clamp(static_cast<int>(std::floor(s.y0)) - 1, 0, height - 1);
  r.width = std::clamp(static_cast<int>(std::ceil(x1)) + 2, 1, width) - r.x;
  r.height = std::clamp(static_cast<int>(std::ceil(y1)) + 2, 1, height) - r.y;
  r.width = std::max(1, r.width);
  r.height = std::max(1, r.height);
  const double step = std::min(s.dx, s.dy);
  r.max_shrink = step >= 8 ? 8 : step >= 4 ? 4 : step >= 2 ? 2 : 1;
  return r;
}

Normalization MakeNormalization(const float* mean, const float* std,
                                int channels) {
  Normalization n;
  for (int c = 0; c < channels; ++c) {
    n.scale[c] = 1.0f / (255.0f * std[c]);
    n.bias[c] = -mean[c] / std[c];
  }
  return n;
}

void SampleImage(const DecodedImage& image, const Sampling& s, int size,
                 const Normalization& norm, float* out) {
  const Taps xs = AxisTaps(s.x0, s.dx, size, image.stored_width,
                           image.scaled_width, image.x, image.width);
  const Taps ys = AxisTaps(s.y0, s.dy, size, image.stored_height,
                           image.scaled_height, image.y, image.height);
  const int ch = image.channels;
  const size_t plane = static_cast<size_t>(size) * size;
  const size_t stride = static_cast<size_t>(image.width) * ch;
  for (int oy = 0; oy < size; ++oy) {
    const uint8_t* r0 = image.pixels.data() + stride * ys.lo[oy];
    const uint8_t* r1 = image.pixels.data() + stride * ys.hi[oy];
    const float wy = ys.w[oy];
    float* row = out + static_cast<size_t>(oy) * size;
    for (int ox = 0; ox < size; ++ox) {
      const int a = xs.lo[ox] * ch, b = xs.hi[ox] * ch;
      const float wx = xs.w[ox];
      const int dst = s.flip ? size - 1 - ox : ox;
      for (int c = 0; c < ch; ++c) {
        const float top = r0[a + c] + wx * (r0[b + c] - r0[a + c]);
        const float bottom = r1[a + c] + wx * (r1[b + c] - r1[a + c]);
        const float v = top + wy * (bottom - top);
        row[c * plane + dst] = v * norm.scale[c] + norm.bias[c];
      }
    }
  }
}

}  // namespace cohort
