// The two decoders behind DecodeImage (image_decode.h), one per file
// format, and what they share. Internal to worker/data.
//
// Both run the C libraries' setjmp/longjmp error handling inside small
// functions that hold no C++ objects with destructors, so a longjmp never
// skips one; the C++ side allocates between those steps.
//
// Thread safety: reentrant.
#ifndef COHORT_WORKER_DATA_IMAGE_CODECS_H_
#define COHORT_WORKER_DATA_IMAGE_CODECS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "worker/data/image_decode.h"

namespace cohort {
namespace image_internal {

// DataLoss "NAME: WHAT", the name quoted if it must be (common/quote.h).
absl::Status Bad(const std::string& name, absl::string_view what);

// OK when a stored width x height is within the bounds (and the request's
// max_pixels); DataLoss naming the file otherwise.
absl::Status CheckImageSize(int64_t width, int64_t height,
                            const DecodeRequest& request,
                            const std::string& name);

// The region asked for, clamped to the image (the whole image when the
// request has no plan).
ImageRegion PlanRegion(const DecodeRequest& request, int width, int height);

// `bytes` starts with the JPEG or PNG signature respectively.
absl::StatusOr<DecodedImage> DecodeJpeg(absl::string_view bytes,
                                        const std::string& name,
                                        const DecodeRequest& request);
absl::StatusOr<DecodedImage> DecodePng(absl::string_view bytes,
                                       const std::string& name,
                                       const DecodeRequest& request);

}  // namespace image_internal
}  // namespace cohort

#endif  // COHORT_WORKER_DATA_IMAGE_CODECS_H_
