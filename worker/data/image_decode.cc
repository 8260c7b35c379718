#include "worker/data/image_decode.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "worker/data/image_codecs.h"

namespace cohort {
namespace image_internal {

absl::Status Bad(const std::string& name, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(QuoteName(name), ": ", what));
}

absl::Status CheckImageSize(int64_t width, int64_t height,
                            const DecodeRequest& request,
                            const std::string& name) {
  const int64_t max_pixels = request.max_pixels > 0
                                 ? std::min(request.max_pixels, kMaxImagePixels)
                                 : kMaxImagePixels;
  if (width <= 0 || height <= 0) {
    return Bad(name, absl::StrCat("an image of ", width, "x", height,
                                  " pixels (empty)"));
  }
  if (width > kMaxImageSide || height > kMaxImageSide ||
      width * height > max_pixels) {
    return Bad(name,
               absl::StrCat("an image of ", width, "x", height,
                            " pixels, larger than the limit (", kMaxImageSide,
                            " a side, ", max_pixels, " pixels)"));
  }
  return absl::OkStatus();
}

ImageRegion PlanRegion(const DecodeRequest& request, int width, int height) {
  ImageRegion r;
  if (request.plan) r = request.plan(width, height);
  if (r.width <= 0 || r.height <= 0) {
    r.x = r.y = 0;
    r.width = width;
    r.height = height;
  }
  r.x = std::clamp(r.x, 0, width - 1);
  r.y = std::clamp(r.y, 0, height - 1);
  r.width = std::clamp(r.width, 1, width - r.x);
  r.height = std::clamp(r.height, 1, height - r.y);
  if (r.max_shrink >= 8) {
    r.max_shrink = 8;
  } else if (r.max_shrink >= 4) {
    r.max_shrink = 4;
  } else if (r.max_shrink >= 2) {
    r.max_shrink = 2;
  } else {
    r.max_shrink = 1;
  }
  return r;
}

}  // namespace image_internal

namespace {

// The formats users most often put in an image folder by mistake, by their
// signatures, so the message can say what the file is.
const char* OtherFormat(absl::string_view b) {
  if (absl::StartsWith(b, "GIF87a") || absl::StartsWith(b, "GIF89a")) {
    return "GIF";
  }
  if (absl::StartsWith(b, "BM")) return "BMP";
  if (b.size() >= 12 && absl::StartsWith(b, "RIFF") &&
      b.substr(8, 4) == "WEBP") {
    return "WebP";
  }
  if (absl::StartsWith(b, absl::string_view("II*\0", 4)) ||
      absl::StartsWith(b, absl::string_view("MM\0*", 4))) {
    return "TIFF";
  }
  if (b.size() >= 12 && b.substr(4, 4) == "ftyp") return "HEIF/AVIF";
  return nullptr;
}

}  // namespace

absl::StatusOr<DecodedImage> DecodeImage(absl::string_view bytes,
                                         const std::string& name,
                                         const DecodeRequest& request) {
  if (request.channels != 1 && request.channels != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DecodeImage: channels must be 1 or 3, got ", request.channels));
  }
  if (absl::StartsWith(bytes, "\xff\xd8\xff")) {
    return image_internal::DecodeJpeg(bytes, name, request);
  }
  if (absl::StartsWith(bytes, "\x89PNG\r\n\x1a\n")) {
    return image_internal::DecodePng(bytes, name, request);
  }
  if (bytes.empty()) return image_internal::Bad(name, "an empty file");
  const char* other = OtherFormat(bytes);
  return image_internal::Bad(
      name, other != nullptr
                ? absl::StrCat("not a JPEG or PNG file (a ", other, " image)")
                : std::string("not a JPEG or PNG file"));
}

}  // namespace cohort
