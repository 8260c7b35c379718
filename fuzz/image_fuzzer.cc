// Fuzzes the JPEG/PNG decoder (worker/data/image_decode.h) and the sampling
// behind it (image_transform.h): the input is decoded whole and over a
// region (with DCT scaling) chosen from its own bytes, to 3 and 1 channels,
// and an accepted image is sampled into a small output.
//
// Properties: an error is DATA_LOSS and starts with the file's name; an
// accepted image holds exactly width x height x channels bytes, within the
// scaled image, covering the region asked for, within the size bound; the
// sampler reads only inside it (ASan).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fuzz/fuzz_util.h"
#include "worker/data/image_decode.h"
#include "worker/data/image_transform.h"

namespace cohort {
namespace {

// Small enough that every input decodes in milliseconds.
constexpr int64_t kFuzzMaxPixels = int64_t{1} << 20;

void CheckImage(const DecodedImage& d, int channels, const ImageRegion* want) {
  FUZZ_CHECK(d.channels == channels, "channels");
  FUZZ_CHECK(d.width > 0 && d.height > 0, "empty image accepted");
  FUZZ_CHECK(int64_t{d.stored_width} * d.stored_height <= kFuzzMaxPixels,
             "size bound");
  FUZZ_CHECK(
      d.pixels.size() == static_cast<size_t>(d.width) * d.height * channels,
      "pixel count");
  FUZZ_CHECK(d.x >= 0 && d.y >= 0 && d.x + d.width <= d.scaled_width &&
                 d.y + d.height <= d.scaled_height,
             "outside the scaled image");
  if (want != nullptr && d.shrink == 1) {
    FUZZ_CHECK(d.x <= want->x && d.y <= want->y, "region start");
    FUZZ_CHECK(d.x + d.width >= want->x + want->width - 1 &&
                   d.y + d.height >= want->y + want->height - 1,
               "region end");
  }
}

void Run(absl::string_view input) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : input.substr(0, 64)) h = (h ^ c) * 1099511628211ull;
  for (int channels : {3, 1}) {
    DecodeRequest request;
    request.channels = channels;
    request.max_pixels = kFuzzMaxPixels;
    ImageRegion asked;
    Sampling sampling;
    int size = 8;
    bool planned = false;
    if (channels == 1) {  // a training crop
      request.plan = [&](int width, int height) {
        SplitMix64 rng(h);
        CropParams p;
        const CropBox box = RandomResizedCropBox(width, height, p, rng);
        size = 1 + static_cast<int>(h % 24);
        sampling = CropSampling(box, size);
        sampling.flip = (h >> 40) & 1;
        asked = RegionFor(sampling, size, width, height);
        planned = true;
        return asked;
      };
    }
    absl::StatusOr<DecodedImage> d = DecodeImage(input, "f.jpg", request);
    if (!d.ok()) {
      FUZZ_CHECK(d.status().code() == absl::StatusCode::kDataLoss,
                 d.status().ToString());
      FUZZ_CHECK(absl::StartsWith(d.status().message(), "f.jpg: "),
                 d.status().ToString());
      continue;
    }
    CheckImage(*d, channels, planned ? &asked : nullptr);
    if (!planned) {
      sampling = CenterSampling(d->stored_width, d->stored_height, 9, 8);
    }
    const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
    std::vector<float> out(static_cast<size_t>(channels) * size * size);
    SampleImage(*d, sampling, size, MakeNormalization(mean, std, channels),
                out.data());
  }
}

}  // namespace
}  // namespace cohort

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::Run(cohort::fuzz::AsView(data, size));
  return 0;
}
