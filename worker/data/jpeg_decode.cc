// JPEG through libjpeg-turbo: baseline, progressive and arithmetic-coded,
// 8-bit, in grayscale, YCbCr, RGB, CMYK or YCCK.
//
// Speed: the IDCT is JDCT_ISLOW. libjpeg-turbo's SIMD ISLOW is as fast as
// IFAST on x86-64 (both are AVX2 code) and exact, and it is what PIL uses,
// so the pixels match torchvision's. Output is RGB straight from the
// decoder's color converter (JCS_RGB, 3 bytes a pixel). Only the rows and
// iMCU columns of the region asked for are decoded (jpeg_skip_scanlines,
// jpeg_crop_scanline; decoding stops after its last row), at 1/2, 1/4 or
// 1/8 size (DCT scaling) when the caller allows it.
//
// A progressive file's scans are bounded (kMaxJpegScans): each scan is a
// pass over the whole image's coefficients, so a small file of hundreds of
// valid scans would cost seconds to decode, every epoch.
#include <setjmp.h>

// jpeglib.h uses FILE and size_t without including their headers.
// clang-format off
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "worker/data/image_codecs.h"

namespace cohort {
namespace image_internal {
namespace {

// libjpeg writes 6 scans for a grey progressive file and 10 for a color
// one (jpeg_simple_progression); encoders tuned for size write a few dozen
// at most. libjpeg-turbo's tools suggest a limit of this order (djpeg
// -maxscans).
constexpr int kMaxJpegScans = 100;

// Marks a JpegError::code that is no libjpeg message code.
constexpr int kTooManyScans = -1;

// libjpeg's error manager with a way back: error_exit (and every warning
// that means corrupt data) longjmps to `jump` with the message kept.
struct JpegError {
  jpeg_error_mgr mgr;  // first, so a jpeg_error_mgr* is a JpegError*
  jmp_buf jump;
  int code;
  char message[JMSG_LENGTH_MAX];
};

// Called by libjpeg as it reads each scan (and row of it): past
// kMaxJpegScans it stops the decode the way an error does.
void OnJpegProgress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  const int scan = reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number;
  if (scan <= kMaxJpegScans) return;
  JpegError* e = reinterpret_cast<JpegError*>(cinfo->err);
  e->code = kTooManyScans;
  longjmp(e->jump, 1);
}

void OnJpegError(j_common_ptr cinfo) {
  JpegError* e = reinterpret_cast<JpegError*>(cinfo->err);
  e->code = e->mgr.msg_code;
  (*e->mgr.format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

// Warnings (level -1) about damaged data are errors: libjpeg would go on and
// fill the rest of the image with gray. The harmless ones are ignored, as
// are trace messages (level >= 0).
void OnJpegMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  switch (cinfo->err->msg_code) {
    case JWRN_ADOBE_XFORM:
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_ICC:
      return;
    default:
      OnJpegError(cinfo);
  }
}

// The decoder's state between the steps; plain data only.
struct JpegRun {
  jpeg_decompress_struct cinfo;
  JpegError err;
  jpeg_progress_mgr progress;
  bool created;
  // Set by the caller before StartJpeg.
  int shrink;
  J_COLOR_SPACE out_space;
  int want_x, want_y, want_width, want_height;  // in scaled pixels
  // Set by StartJpeg: the scaled image's size (jpeg_crop_scanline then
  // changes output_width to the crop's) and the columns delivered.
  JDIMENSION scaled_width, scaled_height;
  JDIMENSION x, width;
  int components;  // per output pixel (4 for CMYK)
  // For ReadJpegRows.
  uint8_t* out;       // want_height rows of width x (3 or 1)
  int out_channels;   // 3 or 1
  uint8_t* cmyk_row;  // width x 4, for CMYK and YCCK files
  bool inverted;      // Adobe CMYK: stored as 255 - value
};

// Each step below runs under setjmp and holds no C++ objects, so a longjmp
// out of libjpeg skips no destructor. They return false on an error, with
// run->err.message set.
bool ReadJpegHeader(JpegRun* run, const uint8_t* data, size_t size) {
  run->cinfo.err = jpeg_std_error(&run->err.mgr);
  run->err.mgr.error_exit = OnJpegError;
  run->err.mgr.emit_message = OnJpegMessage;
  if (setjmp(run->err.jump)) return false;
  jpeg_create_decompress(&run->cinfo);
  run->created = true;
  // libjpeg's own buffers (a progressive file's coefficients) stay bounded
  // too: past this it fails instead of allocating.
  run->cinfo.mem->max_memory_to_use = 1L << 30;
  run->progress.progress_monitor = OnJpegProgress;
  run->cinfo.progress = &run->progress;
  jpeg_mem_src(&run->cinfo, data, size);
  jpeg_read_header(&run->cinfo, TRUE);
  return true;
}

bool StartJpeg(JpegRun* run) {
  if (setjmp(run->err.jump)) return false;
  jpeg_decompress_struct& c = run->cinfo;
  c.out_color_space = run->out_space;
  c.dct_method = JDCT_ISLOW;
  c.scale_num = 1;
  c.scale_denom = run->shrink;
  jpeg_start_decompress(&c);
  run->components = c.output_components;
  run->scaled_width = c.output_width;
  run->scaled_height = c.output_height;
  const int w = static_cast<int>(c.output_width);
  const int h = static_cast<int>(c.output_height);
  run->want_x = std::min(run->want_x, w - 1);
  run->want_y = std::min(run->want_y, h - 1);
  run->want_width = std::min(run->want_width, w - run->want_x);
  run->want_height = std::min(run->want_height, h - run->want_y);
  run->x = run->want_x;
  run->width = run->want_width;
  if (run->width < c.output_width) {
    jpeg_crop_scanline(&c, &run->x, &run->width);
  } else {
    run->x = 0;
    run->width = c.output_width;
  }
  return true;
}

// Luma of an RGB pixel (BT.601, as libjpeg and PIL compute it).
inline uint8_t Luma(int r, int g, int b) {
  return static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 32768) >> 16);
}

// One decoded CMYK row to RGB (or luma): R = (255 - C)(255 - K) / 255.
void CmykRow(const JpegRun* run, uint8_t* dst) {
  const uint8_t* p = run->cmyk_row;
  for (JDIMENSION i = 0; i < run->width; ++i, p += 4) {
    int c = p[0], m = p[1], y = p[2], k = p[3];
    if (!run->inverted) {
      c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    }
    const int r = (c * k + 127) / 255, g = (m * k + 127) / 255,
              b = (y * k + 127) / 255;
    if (run->out_channels == 1) {
      *dst++ = Luma(r, g, b);
    } else {
      *dst++ = static_cast<uint8_t>(r);
      *dst++ = static_cast<uint8_t>(g);
      *dst++ = static_cast<uint8_t>(b);
    }
  }
}

bool ReadJpegRows(JpegRun* run) {
  if (setjmp(run->err.jump)) return false;
  jpeg_decompress_struct& c = run->cinfo;
  if (run->want_y > 0) jpeg_skip_scanlines(&c, run->want_y);
  const size_t stride = size_t{run->width} * run->out_channels;
  for (int row = 0; row < run->want_height;) {
    uint8_t* dst = run->out + stride * row;
    JSAMPROW rows[1] = {run->cmyk_row != nullptr ? run->cmyk_row : dst};
    if (jpeg_read_scanlines(&c, rows, 1) != 1) {
      ERREXIT(&c, JERR_INPUT_EOF);
    }
    if (run->cmyk_row != nullptr) CmykRow(run, dst);
    ++row;
  }
  // The rows below the region are not needed: stop without decoding them.
  jpeg_abort_decompress(&c);
  return true;
}

// Whether the end-of-image marker lies in the last 64 KiB (trailing bytes
// after it are common and allowed; more than 64 KiB of them is refused as
// truncated). Decoding stops after the region's last row, so
// a truncated file must be caught before, or it would fail only for the
// crops that reach its end.
bool HasEndMarker(absl::string_view b) {
  const size_t from = b.size() > (64 << 10) ? b.size() - (64 << 10) : 0;
  for (size_t i = b.size(); i-- > from + 1;) {
    if (static_cast<uint8_t>(b[i - 1]) == 0xff &&
        static_cast<uint8_t>(b[i]) == 0xd9) {
      return true;
    }
  }
  return false;
}

absl::Status JpegFailure(const JpegRun& run, const std::string& name) {
  if (run.err.code == kTooManyScans) {
    return Bad(name,
               absl::StrCat("a progressive JPEG of more than ", kMaxJpegScans,
                            " scans (each is a pass over the whole "
                            "image); re-encode it with fewer"));
  }
  if (run.err.code == JERR_BAD_PRECISION) {
    return Bad(name, absl::StrCat("a ", run.cinfo.data_precision,
                                  "-bit JPEG; only 8-bit JPEGs are supported"));
  }
  return Bad(name, absl::StrCat("corrupt or unsupported JPEG: ",
                                EscapeText(run.err.message)));
}

// The decoder's output colors for the file's: RGB or luma straight from
// libjpeg, or CMYK converted here.
absl::Status ChooseColors(JpegRun* run, int channels, const std::string& name) {
  switch (run->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_YCbCr:
    case JCS_RGB:
      run->out_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
      return absl::OkStatus();
    case JCS_CMYK:
    case JCS_YCCK:
      run->out_space = JCS_CMYK;
      run->inverted = run->cinfo.saw_Adobe_marker;
      return absl::OkStatus();
    default:
      return Bad(name, absl::StrCat("a JPEG with ", run->cinfo.num_components,
                                    " components in an unknown color space"));
  }
}

// The largest DCT scaling (1/2, 1/4, 1/8) the region allows.
void ChooseScale(JpegRun* run, const ImageRegion& region) {
  jpeg_decompress_struct& c = run->cinfo;
  run->shrink = region.max_shrink;
  // Scaled size: ceil(stored / shrink), as libjpeg computes it.
  const int w =
      (static_cast<int>(c.image_width) + run->shrink - 1) / run->shrink;
  const int h =
      (static_cast<int>(c.image_height) + run->shrink - 1) / run->shrink;
  // The region in scaled pixels, widened by one for bilinear neighbours.
  const double sx = static_cast<double>(w) / c.image_width;
  const double sy = static_cast<double>(h) / c.image_height;
  const int x0 = std::max(0, static_cast<int>(region.x * sx) - 1);
  const int y0 = std::max(0, static_cast<int>(region.y * sy) - 1);
  const int x1 =
      std::min(w, static_cast<int>((region.x + region.width) * sx) + 2);
  const int y1 =
      std::min(h, static_cast<int>((region.y + region.height) * sy) + 2);
  run->want_x = x0;
  run->want_y = y0;
  run->want_width = std::max(1, x1 - x0);
  run->want_height = std::max(1, y1 - y0);
}

// Fancy (smooth) chroma upsampling needs the column to the right of a
// pixel: in a jpeg_crop_scanline crop that ends inside the image, the last
// column is upsampled as if it were the image's edge and differs from a
// whole decode. It is dropped (the region asked for has a margin).
void DropCroppedEdge(JDIMENSION output_width, DecodedImage* image) {
  if (image->x + image->width >= static_cast<int>(output_width) ||
      image->width < 2) {
    return;
  }
  const size_t old_stride = static_cast<size_t>(image->width) * image->channels;
  const size_t new_stride = old_stride - image->channels;
  for (int y = 1; y < image->height; ++y) {
    std::memmove(image->pixels.data() + new_stride * y,
                 image->pixels.data() + old_stride * y, new_stride);
  }
  image->width -= 1;
  image->pixels.resize(new_stride * image->height);
}

}  // namespace

absl::StatusOr<DecodedImage> DecodeJpeg(absl::string_view bytes,
                                        const std::string& name,
                                        const DecodeRequest& request) {
  JpegRun run;
  std::memset(&run, 0, sizeof(run));
  // Destroys the decoder on every path; runs outside any setjmp scope.
  struct Destroy {
    JpegRun* run;
    ~Destroy() {
      if (run->created) jpeg_destroy_decompress(&run->cinfo);
    }
  } destroy{&run};
  if (!ReadJpegHeader(&run, reinterpret_cast<const uint8_t*>(bytes.data()),
                      bytes.size())) {
    return JpegFailure(run, name);
  }
  jpeg_decompress_struct& c = run.cinfo;
  absl::Status s = CheckImageSize(c.image_width, c.image_height, request, name);
  if (s.ok()) s = ChooseColors(&run, request.channels, name);
  if (!s.ok()) return s;
  if (!HasEndMarker(bytes)) {
    return Bad(name, "a truncated JPEG (no end-of-image marker)");
  }
  const ImageRegion region = PlanRegion(request, c.image_width, c.image_height);
  ChooseScale(&run, region);
  if (!StartJpeg(&run)) return JpegFailure(run, name);
  DecodedImage image;
  image.stored_width = c.image_width;
  image.stored_height = c.image_height;
  image.shrink = run.shrink;
  image.scaled_width = run.scaled_width;
  image.scaled_height = run.scaled_height;
  image.x = run.x;
  image.y = run.want_y;
  image.width = run.width;
  image.height = run.want_height;
  image.channels = request.channels;
  run.out_channels = request.channels;
  image.pixels.resize(size_t{run.width} * run.want_height * request.channels);
  run.out = image.pixels.data();
  std::vector<uint8_t> cmyk;
  if (run.out_space == JCS_CMYK) {
    cmyk.resize(size_t{run.width} * 4);
    run.cmyk_row = cmyk.data();
  }
  if (!ReadJpegRows(&run)) return JpegFailure(run, name);
  DropCroppedEdge(run.scaled_width, &image);
  return image;
}

}  // namespace image_internal
}  // namespace cohort
