// PNG through libpng's classic API: gray, gray + alpha, RGB, RGBA, palette,
// 1- to 16-bit, interlaced or not. Alpha is dropped (the color values are
// kept, as PIL's convert("RGB") does), 16-bit samples are scaled to 8
// (png_set_scale_16: round(v * 255 / 65535)), palettes expanded, gray
// repeated into RGB or RGB reduced to BT.601 luma. Always decoded whole:
// each row is filtered against the one above, so rows cannot be skipped.
#include <png.h>
#include <setjmp.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "worker/data/image_codecs.h"

namespace cohort {
namespace image_internal {
namespace {

// The decoder's state; plain data only (see PngStep).
struct PngRun {
  png_structp png;
  png_infop info;
  const uint8_t* data;
  size_t size, offset;
  bool truncated;
  char message[200];
  png_uint_32 width, height;
  int bit_depth, color_type, interlace;
  int channels;     // wanted: 1 or 3
  png_bytepp rows;  // height row pointers into the output
};

void OnPngError(png_structp png, png_const_charp message) {
  PngRun* run = static_cast<PngRun*>(png_get_error_ptr(png));
  std::snprintf(run->message, sizeof(run->message), "%s", message);
  png_longjmp(png, 1);
}

// Warnings are about ancillary chunks (a bad ICC profile, a stray text
// chunk); the pixels are fine.
void OnPngWarning(png_structp, png_const_charp) {}

void ReadFromMemory(png_structp png, png_bytep out, png_size_t n) {
  PngRun* run = static_cast<PngRun*>(png_get_io_ptr(png));
  if (n > run->size - run->offset) {
    run->truncated = true;
    png_error(png, "the file ends early (truncated)");
  }
  std::memcpy(out, run->data + run->offset, n);
  run->offset += n;
}

// The steps run under setjmp and hold no C++ objects, so libpng's longjmp
// skips no destructor; false on an error with run->message set.
bool ReadPngHeader(PngRun* run) {
  run->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, run, OnPngError,
                                    OnPngWarning);
  if (run->png == nullptr) return false;
  if (setjmp(png_jmpbuf(run->png))) return false;
  run->info = png_create_info_struct(run->png);
  if (run->info == nullptr) png_error(run->png, "out of memory");
  png_set_read_fn(run->png, run, ReadFromMemory);
  png_set_user_limits(run->png, kMaxImageSide, kMaxImageSide);
  // Text and ICC chunks are never needed: bound what they may allocate.
  png_set_chunk_malloc_max(run->png, 8 << 20);
  png_read_info(run->png, run->info);
  png_get_IHDR(run->png, run->info, &run->width, &run->height, &run->bit_depth,
               &run->color_type, &run->interlace, nullptr, nullptr);
  return true;
}

// Every stored layout to 8-bit gray or RGB without alpha.
bool SetPngTransforms(PngRun* run) {
  if (setjmp(png_jmpbuf(run->png))) return false;
  png_structp png = run->png;
  if (run->bit_depth == 16) png_set_scale_16(png);
  if (run->color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (run->color_type == PNG_COLOR_TYPE_GRAY && run->bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(png);
  }
  // A tRNS chunk is transparency only: ignored, like an alpha channel.
  if (run->color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  const bool color = (run->color_type & PNG_COLOR_MASK_COLOR) != 0;
  if (run->channels == 3 && !color) png_set_gray_to_rgb(png);
  if (run->channels == 1 && color) {
    png_set_rgb_to_gray_fixed(png, 1, 29900, 58700);  // BT.601
  }
  if (run->interlace != PNG_INTERLACE_NONE) png_set_interlace_handling(png);
  png_read_update_info(png, run->info);
  if (png_get_channels(png, run->info) != run->channels ||
      png_get_bit_depth(png, run->info) != 8) {
    png_error(png, "unexpected layout after conversion");
  }
  return true;
}

bool ReadPngRows(PngRun* run) {
  if (setjmp(png_jmpbuf(run->png))) return false;
  png_read_image(run->png, run->rows);
  return true;
}

}  // namespace

absl::StatusOr<DecodedImage> DecodePng(absl::string_view bytes,
                                       const std::string& name,
                                       const DecodeRequest& request) {
  PngRun run;
  std::memset(&run, 0, sizeof(run));
  run.data = reinterpret_cast<const uint8_t*>(bytes.data());
  run.size = bytes.size();
  run.channels = request.channels;
  struct Destroy {
    PngRun* run;
    ~Destroy() {
      if (run->png != nullptr) {
        png_destroy_read_struct(&run->png, &run->info, nullptr);
      }
    }
  } destroy{&run};
  auto failure = [&] {
    return Bad(name, run.truncated
                         ? std::string("a truncated PNG (the file ends early)")
                         : absl::StrCat("corrupt or unsupported PNG: ",
                                        EscapeText(run.message)));
  };
  if (!ReadPngHeader(&run)) return failure();
  absl::Status s = CheckImageSize(run.width, run.height, request, name);
  if (!s.ok()) return s;
  // The caller learns the size through its plan; the whole image is
  // decoded whatever region it asks for.
  PlanRegion(request, run.width, run.height);
  if (!SetPngTransforms(&run)) return failure();
  DecodedImage image;
  image.stored_width = image.scaled_width = image.width = run.width;
  image.stored_height = image.scaled_height = image.height = run.height;
  image.channels = request.channels;
  const size_t stride = size_t{run.width} * request.channels;
  image.pixels.resize(stride * run.height);
  std::vector<png_bytep> rows(run.height);
  for (png_uint_32 y = 0; y < run.height; ++y) {
    rows[y] = image.pixels.data() + stride * y;
  }
  run.rows = rows.data();
  if (!ReadPngRows(&run)) return failure();
  return image;
}

}  // namespace image_internal
}  // namespace cohort
