#include "tests/image_files.h"

// jpeglib.h uses FILE and size_t without including their headers.
// clang-format off
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

// A test helper: libjpeg's and libpng's default error handlers (print and
// exit, or abort) are fine here, since the inputs are our own.
namespace cohort {
namespace {

uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// CMYK as Photoshop stores it in a JPEG with an Adobe marker: inverted,
// so that R = C' * K' / 255.
std::vector<uint8_t> ToInvertedCmyk(const Pixels& p) {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(p.width) * p.height * 4);
  for (size_t i = 0; i < p.data.size(); i += 3) {
    const int r = p.data[i], g = p.data[i + 1], b = p.data[i + 2];
    const int k = std::max({r, g, b});  // 255 - K
    auto scaled = [k](int v) { return k == 0 ? 0 : (v * 255 + k / 2) / k; };
    out.push_back(scaled(r));
    out.push_back(scaled(g));
    out.push_back(scaled(b));
    out.push_back(k);
  }
  return out;
}

void AppendPng(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))
      ->append(reinterpret_cast<const char*>(data), n);
}

const char* const kCifarNames[10] = {"airplane", "automobile", "bird", "cat",
                                     "deer",     "dog",        "frog", "horse",
                                     "ship",     "truck"};

// Bilinear resize (for making large test images from small ones).
Pixels Resize(const Pixels& in, int w, int h) {
  Pixels out;
  out.width = w;
  out.height = h;
  out.channels = in.channels;
  out.data.resize(static_cast<size_t>(w) * h * in.channels);
  for (int y = 0; y < h; ++y) {
    const double v =
        std::clamp((y + 0.5) * in.height / h - 0.5, 0.0, in.height - 1.0);
    const int y0 = static_cast<int>(v), y1 = std::min(y0 + 1, in.height - 1);
    for (int x = 0; x < w; ++x) {
      const double u =
          std::clamp((x + 0.5) * in.width / w - 0.5, 0.0, in.width - 1.0);
      const int x0 = static_cast<int>(u), x1 = std::min(x0 + 1, in.width - 1);
      for (int c = 0; c < in.channels; ++c) {
        auto px = [&](int xx, int yy) {
          return in
              .data[(static_cast<size_t>(yy) * in.width + xx) * in.channels +
                    c];
        };
        const double top = px(x0, y0) + (u - x0) * (px(x1, y0) - px(x0, y0));
        const double bot = px(x0, y1) + (u - x0) * (px(x1, y1) - px(x0, y1));
        out.at(x, y, c) =
            static_cast<uint8_t>(top + (v - y0) * (bot - top) + 0.5);
      }
    }
  }
  return out;
}

std::string Encode(const Pixels& p, const std::string& format, int quality) {
  if (format == "png") return EncodePng(p);
  JpegOptions o;
  o.quality = quality;
  return EncodeJpeg(p, o);
}

}  // namespace

std::string EncodeJpeg(const Pixels& image, const JpegOptions& options) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buffer, &size);
  c.image_width = image.width;
  c.image_height = image.height;
  const bool cmyk = options.cmyk || options.ycck;
  c.input_components = cmyk ? 4 : image.channels;
  c.in_color_space = cmyk                  ? JCS_CMYK
                     : image.channels == 1 ? JCS_GRAYSCALE
                                           : JCS_RGB;
  jpeg_set_defaults(&c);
  if (options.ycck) jpeg_set_colorspace(&c, JCS_YCCK);
  jpeg_set_quality(&c, options.quality, TRUE);
  if (options.progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  const std::vector<uint8_t> cmyk_data =
      cmyk ? ToInvertedCmyk(image) : std::vector<uint8_t>();
  const uint8_t* data = cmyk ? cmyk_data.data() : image.data.data();
  const size_t stride = static_cast<size_t>(image.width) * c.input_components;
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(data + stride * c.next_scanline);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return out;
}

std::string EncodePng(const Pixels& image, const PngOptions& o) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::string out;
  png_set_write_fn(png, &out, AppendPng, nullptr);
  const bool gray = image.channels == 1;
  int type = gray ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB;
  if (o.alpha) type |= PNG_COLOR_MASK_ALPHA;
  std::vector<png_color> palette;
  std::vector<uint8_t> indices;
  if (o.palette) {
    type = PNG_COLOR_TYPE_PALETTE;
    for (size_t i = 0; i < image.data.size(); i += image.channels) {
      png_color color;
      color.red = image.data[i];
      color.green = image.data[i + (gray ? 0 : 1)];
      color.blue = image.data[i + (gray ? 0 : 2)];
      auto it = std::find_if(palette.begin(), palette.end(), [&](png_color p) {
        return p.red == color.red && p.green == color.green &&
               p.blue == color.blue;
      });
      if (it == palette.end() && palette.size() < 256) {
        palette.push_back(color);
        it = palette.end() - 1;
      } else if (it == palette.end()) {
        it = palette.begin();
      }
      indices.push_back(static_cast<uint8_t>(it - palette.begin()));
    }
  }
  const int depth = o.sixteen && !o.palette ? 16 : 8;
  png_set_IHDR(png, info, image.width, image.height, depth, type,
               o.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (o.palette) {
    png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  }
  png_write_info(png, info);
  // Rows in the stored layout.
  const int in_ch = image.channels;
  const int samples = o.palette ? 1 : in_ch + (o.alpha ? 1 : 0);
  const int bytes = depth / 8;
  std::vector<std::vector<uint8_t>> rows(image.height);
  std::vector<png_bytep> pointers(image.height);
  for (int y = 0; y < image.height; ++y) {
    std::vector<uint8_t>& row = rows[y];
    row.resize(static_cast<size_t>(image.width) * samples * bytes);
    size_t k = 0;
    for (int x = 0; x < image.width; ++x) {
      const size_t p = static_cast<size_t>(y) * image.width + x;
      if (o.palette) {
        row[k++] = indices[p];
        continue;
      }
      for (int s = 0; s < samples; ++s) {
        const int v = s < in_ch ? image.data[p * in_ch + s] : 200;  // alpha
        row[k++] = static_cast<uint8_t>(v);
        if (bytes == 2) row[k++] = static_cast<uint8_t>(v);  // v * 257
      }
    }
    pointers[y] = row.data();
  }
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

Pixels SyntheticImage(int label, uint64_t seed, int width, int height,
                      int channels) {
  static const uint8_t kColors[10][3] = {
      {220, 40, 40},   {40, 200, 40},  {40, 60, 220},  {230, 210, 40},
      {200, 40, 200},  {40, 200, 210}, {240, 140, 30}, {120, 120, 120},
      {250, 250, 250}, {20, 20, 20}};
  Pixels p;
  p.width = width;
  p.height = height;
  p.channels = channels;
  p.data.resize(static_cast<size_t>(width) * height * channels);
  const uint64_t r = Mix(seed);
  const double shade = 0.75 + 0.25 * ((r & 0xff) / 255.0);
  const int phase = static_cast<int>((r >> 8) & 7);
  const bool vertical = label % 2 == 0;
  uint64_t noise = Mix(r);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const bool stripe = (((vertical ? x : y) + phase) / 4) % 2 == 0;
      noise = Mix(noise);
      const int jitter = static_cast<int>(noise & 31) - 16;
      for (int c = 0; c < channels; ++c) {
        const int base = channels == 1 ? (kColors[label % 10][0] * 3 +
                                          kColors[label % 10][1] * 6 +
                                          kColors[label % 10][2]) /
                                             10
                                       : kColors[label % 10][c];
        const double v = base * shade * (stripe ? 1.0 : 0.7) + jitter;
        p.at(x, y, c) = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return p;
}

bool WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), bytes.size());
  return static_cast<bool>(f);
}

int64_t WriteImageFolder(const std::string& dir, const FolderOptions& o) {
  int64_t written = 0;
  for (const char* split : {"train", "val"}) {
    const int per_class =
        std::string(split) == "train" ? o.train_per_class : o.val_per_class;
    if (per_class == 0) continue;
    for (int k = 0; k < o.classes; ++k) {
      const std::string folder =
          absl::StrFormat("%s/%s/class_%02d", dir, split, k);
      std::filesystem::create_directories(folder);
      for (int i = 0; i < per_class; ++i) {
        const uint64_t seed = Mix(o.seed * 1000003 + written);
        const bool png =
            o.format == "png" || (o.format == "mixed" && i % 3 == 2);
        const Pixels p = SyntheticImage(k, seed, o.width, o.height);
        WriteBytes(
            absl::StrFormat("%s/%05d.%s", folder, i, png ? "png" : "jpg"),
            Encode(p, png ? "png" : "jpg", o.quality));
        ++written;
      }
    }
  }
  return written;
}

int64_t WriteCifarFolder(const std::string& batch, const std::string& dir,
                         const std::string& split, int64_t limit,
                         const std::string& format, int upscale_width,
                         int upscale_height) {
  std::ifstream in(batch, std::ios::binary);
  if (!in) return 0;
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  int64_t n = static_cast<int64_t>(bytes.size() / 3073);
  if (limit > 0) n = std::min(n, limit);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* rec =
        reinterpret_cast<const uint8_t*>(bytes.data()) + i * 3073;
    const int label = rec[0] % 10;
    Pixels p;
    p.width = p.height = 32;
    p.data.resize(32 * 32 * 3);
    for (int j = 0; j < 1024; ++j) {
      for (int c = 0; c < 3; ++c) p.data[j * 3 + c] = rec[1 + c * 1024 + j];
    }
    if (upscale_width > 0) p = Resize(p, upscale_width, upscale_height);
    const std::string folder =
        absl::StrCat(dir, "/", split, "/", kCifarNames[label]);
    std::filesystem::create_directories(folder);
    const bool png = format == "png" || (format == "mixed" && i % 3 == 2);
    WriteBytes(absl::StrFormat("%s/%05d.%s", folder, i, png ? "png" : "jpg"),
               Encode(p, png ? "png" : "jpg", 90));
  }
  return n;
}

}  // namespace cohort
