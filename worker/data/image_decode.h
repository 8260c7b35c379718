// Decoding JPEG (libjpeg-turbo) and PNG (libpng) files held in memory into
// 8-bit interleaved pixels (HWC) with 1 or 3 channels.
//
// Everything else is refused by name: the format is recognised from the
// first bytes, not from the file name, so a GIF named .jpg is called a GIF.
// A corrupt or truncated file is DataLoss naming the file; libjpeg's
// "premature end of data" and its other corrupt-data warnings are errors
// too (libjpeg would otherwise fill the rest with gray). The stored size is
// bounded (kMaxImageSide, kMaxImagePixels) before any pixel memory is
// allocated, so a small file cannot claim gigabytes.
//
// A caller that needs only part of the image (a training crop) says so
// through DecodeRequest::plan, called once the stored size is known: a JPEG
// is then decoded only over the rows and (iMCU-aligned) columns asked for,
// and at 1/2, 1/4 or 1/8 size through libjpeg-turbo's DCT scaling when the
// caller will shrink it at least that much anyway. PNG is always decoded
// whole (its rows are filtered against each other).
//
// Thread safety: reentrant (no shared state); each call owns its decoder.
#ifndef COHORT_WORKER_DATA_IMAGE_DECODE_H_
#define COHORT_WORKER_DATA_IMAGE_DECODE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cohort {

// Bounds on the stored size: 2^26 pixels (192 MiB as RGB) and 32768 on a
// side.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;
inline constexpr int kMaxImageSide = 32768;

// The part of a stored image a caller will read, in stored pixels.
struct ImageRegion {
  int x = 0, y = 0, width = 0, height = 0;  // width 0: the whole image
  // The decoder may return the image shrunk by up to this factor (1, 2, 4
  // or 8); DecodedImage::shrink says what it did.
  int max_shrink = 1;
};

struct DecodeRequest {
  int channels = 3;  // 1 (luma, BT.601) or 3 (RGB)
  // Called with the stored width and height; returns the region wanted.
  // Unset: the whole image at full size.
  std::function<ImageRegion(int width, int height)> plan;
  // Tighter bound than kMaxImagePixels (fuzzing); 0 means kMaxImagePixels.
  int64_t max_pixels = 0;
};

// Pixels covering at least the region asked for (perhaps the whole image).
struct DecodedImage {
  int stored_width = 0, stored_height = 0;  // the file's size
  // The image was decoded at ceil(stored / shrink) pixels a side ...
  int shrink = 1;
  int scaled_width = 0, scaled_height = 0;
  // ... of which `pixels` holds the rectangle at (x, y), width x height.
  int x = 0, y = 0, width = 0, height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // height x width x channels
};

// Decodes `bytes` (the contents of `name`, used in messages). Every file
// that cannot be decoded is DataLoss with a one-line message starting
// "NAME: " (the name quoted and escaped if it holds a line break or other
// control byte): a corrupt or truncated file, a file of another format
// (named: GIF, BMP, WebP, TIFF, HEIF/AVIF), a JPEG or PNG this decoder does
// not support (12-bit JPEG; a progressive JPEG of more than 100 scans,
// which would take seconds), an image larger than the bounds.
// InvalidArgument only for a request with channels other than 1 or 3.
//
// A JPEG decoded over a region only is checked only there: a truncated
// file is caught up front (no end-of-image marker near its end), but
// damaged entropy-coded data outside the rows read goes unnoticed.
absl::StatusOr<DecodedImage> DecodeImage(absl::string_view bytes,
                                         const std::string& name,
                                         const DecodeRequest& request = {});

}  // namespace cohort

#endif  // COHORT_WORKER_DATA_IMAGE_DECODE_H_
