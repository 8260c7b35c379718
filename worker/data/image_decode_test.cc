#include "worker/data/image_decode.h"

// jpeglib.h uses FILE and size_t without including their headers.
// clang-format off
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/image_files.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

// Mean absolute difference between a decode and the pixels encoded.
double MeanDiff(const DecodedImage& d, const Pixels& p) {
  EXPECT_EQ(d.width, p.width);
  EXPECT_EQ(d.height, p.height);
  EXPECT_EQ(d.channels, p.channels);
  if (d.pixels.size() != p.data.size()) return 1e9;
  double sum = 0;
  for (size_t i = 0; i < p.data.size(); ++i) {
    sum += std::abs(int{d.pixels[i]} - int{p.data[i]});
  }
  return sum / p.data.size();
}

DecodedImage Decode(const std::string& bytes, int channels = 3,
                    const std::string& name = "x.jpg") {
  DecodeRequest r;
  r.channels = channels;
  absl::StatusOr<DecodedImage> d = DecodeImage(bytes, name, r);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : DecodedImage();
}

std::string ErrorOf(const std::string& bytes, const std::string& name) {
  absl::StatusOr<DecodedImage> d = DecodeImage(bytes, name);
  if (d.ok()) return "OK";
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  return std::string(d.status().message());
}

const Pixels& Image() {
  static const Pixels* p = new Pixels(SyntheticImage(3, 5, 61, 47));
  return *p;
}

// A grey progressive JPEG with a scan script of 1 + 2 x `bands` scans: the
// DC coefficients, then each band of AC coefficients in two scans (the high
// bits, then the last bit), the last band reaching coefficient 63. Every
// scan is valid; there are just many of them.
std::string ManyScanJpeg(int width, int height, int bands) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buffer, &size);
  c.image_width = width;
  c.image_height = height;
  c.input_components = 1;
  c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  std::vector<jpeg_scan_info> scans = {{1, {0}, 0, 0, 0, 0}};
  for (int k = 1; k <= bands; ++k) {
    const int last = k == bands ? 63 : k;
    scans.push_back({1, {0}, k, last, 0, 1});
    scans.push_back({1, {0}, k, last, 1, 0});
  }
  c.scan_info = scans.data();
  c.num_scans = static_cast<int>(scans.size());
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(width);
  while (c.next_scanline < c.image_height) {
    for (int x = 0; x < width; ++x)
      row[x] = (x * 7 + c.next_scanline * 3) & 255;
    JSAMPROW p = row.data();
    jpeg_write_scanlines(&c, &p, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return out;
}

TEST(DecodeImage, JpegRgbProgressiveAndGray) {
  JpegOptions o;
  o.quality = 98;
  // Within what 4:2:0 chroma loses of this noisy image.
  EXPECT_LT(MeanDiff(Decode(EncodeJpeg(Image(), o)), Image()), 6);
  o.progressive = true;
  EXPECT_LT(MeanDiff(Decode(EncodeJpeg(Image(), o)), Image()), 6);
  // A gray file to RGB repeats the luma; an RGB file to 1 channel is luma.
  const Pixels gray = SyntheticImage(3, 5, 61, 47, 1);
  const DecodedImage rgb = Decode(EncodeJpeg(gray, o));
  ASSERT_EQ(rgb.channels, 3);
  for (size_t i = 0; i < rgb.pixels.size(); i += 3) {
    ASSERT_EQ(rgb.pixels[i], rgb.pixels[i + 1]);
    ASSERT_EQ(rgb.pixels[i], rgb.pixels[i + 2]);
  }
  EXPECT_LT(MeanDiff(Decode(EncodeJpeg(gray, o), 1), gray), 4);
  EXPECT_LT(MeanDiff(Decode(EncodeJpeg(Image(), o), 1), gray), 4);
}

// Adobe CMYK (inverted, as Photoshop writes it) and YCCK both come back as
// the RGB they were made from.
TEST(DecodeImage, JpegCmykAndYcckToRgb) {
  JpegOptions o;
  o.quality = 98;
  o.cmyk = true;
  EXPECT_LT(MeanDiff(Decode(EncodeJpeg(Image(), o)), Image()), 6);
  o.cmyk = false;
  o.ycck = true;
  EXPECT_LT(MeanDiff(Decode(EncodeJpeg(Image(), o)), Image()), 6);
}

TEST(DecodeImage, PngLayoutsAreExact) {
  const Pixels gray = SyntheticImage(3, 5, 61, 47, 1);
  EXPECT_EQ(MeanDiff(Decode(EncodePng(Image()), 3, "x.png"), Image()), 0);
  PngOptions o;
  o.alpha = true;  // dropped
  EXPECT_EQ(MeanDiff(Decode(EncodePng(Image(), o), 3, "x.png"), Image()), 0);
  EXPECT_EQ(MeanDiff(Decode(EncodePng(gray, o), 1, "x.png"), gray), 0);
  o = PngOptions();
  o.sixteen = true;  // v * 257 scaled back to v
  EXPECT_EQ(MeanDiff(Decode(EncodePng(Image(), o), 3, "x.png"), Image()), 0);
  o = PngOptions();
  o.interlaced = true;
  EXPECT_EQ(MeanDiff(Decode(EncodePng(Image(), o), 3, "x.png"), Image()), 0);
  // A palette of few colors is exact.
  Pixels flat = Image();
  for (uint8_t& v : flat.data) v &= 0xc0;
  o = PngOptions();
  o.palette = true;
  EXPECT_EQ(MeanDiff(Decode(EncodePng(flat, o), 3, "x.png"), flat), 0);
  // Gray to RGB repeats the value.
  const DecodedImage rgb = Decode(EncodePng(gray), 3, "x.png");
  ASSERT_EQ(rgb.pixels.size(), gray.data.size() * 3);
  for (size_t i = 0; i < gray.data.size(); ++i) {
    ASSERT_EQ(rgb.pixels[3 * i + 2], gray.data[i]);
  }
}

TEST(DecodeImage, OtherFormatsAreRefusedByName) {
  EXPECT_EQ(ErrorOf(std::string("GIF89a\x01\x00\x01\x00", 10), "a/x.jpg"),
            "a/x.jpg: not a JPEG or PNG file (a GIF image)");
  EXPECT_EQ(ErrorOf("BM\x36\x00\x00\x00", "x.png"),
            "x.png: not a JPEG or PNG file (a BMP image)");
  EXPECT_EQ(ErrorOf("hello", "x.jpg"), "x.jpg: not a JPEG or PNG file");
  EXPECT_EQ(ErrorOf("", "x.jpg"), "x.jpg: an empty file");
  std::string twelve = EncodeJpeg(Image());
  twelve[twelve.find("\xff\xc0") + 4] = 12;
  EXPECT_EQ(ErrorOf(twelve, "x.jpg"),
            "x.jpg: a 12-bit JPEG; only 8-bit JPEGs are supported");
}

TEST(DecodeImage, TruncatedAndCorruptFilesAreDataLoss) {
  const std::string jpeg = EncodeJpeg(Image());
  EXPECT_EQ(ErrorOf(jpeg.substr(0, jpeg.size() / 2), "t.jpg"),
            "t.jpg: a truncated JPEG (no end-of-image marker)");
  // Cut, but with an end marker: libjpeg's "premature end" warning is an
  // error, not a gray bottom half.
  EXPECT_THAT(ErrorOf(jpeg.substr(0, jpeg.size() / 2) + "\xff\xd9", "c.jpg"),
              HasSubstr("c.jpg: corrupt or unsupported JPEG: Corrupt JPEG "
                        "data: premature end of data segment"));
  const std::string png = EncodePng(Image());
  EXPECT_EQ(ErrorOf(png.substr(0, png.size() - 40), "t.png"),
            "t.png: a truncated PNG (the file ends early)");
  std::string bad_crc = png;
  bad_crc[png.find("IDAT") + 10] ^= 0x55;
  EXPECT_THAT(ErrorOf(bad_crc, "c.png"), HasSubstr("c.png: corrupt"));
}

// Each scan of a progressive JPEG is a pass over the whole image, so a
// file of hundreds of valid scans decoded for seconds, every epoch: more
// than 100 are refused, naming the file, at the 101st.
TEST(DecodeImage, ProgressiveScansAreBounded) {
  EXPECT_EQ(ErrorOf(ManyScanJpeg(64, 48, 49), "ok.jpg"), "OK");  // 99 scans
  const std::string many = ManyScanJpeg(64, 48, 50);             // 101
  EXPECT_EQ(ErrorOf(many, "many.jpg"),
            "many.jpg: a progressive JPEG of more than 100 scans (each is a "
            "pass over the whole image); re-encode it with fewer");
  DecodeRequest corner;
  corner.plan = [](int, int) { return ImageRegion{0, 0, 8, 8, 8}; };
  EXPECT_FALSE(DecodeImage(many, "many.jpg", corner).ok());
  EXPECT_EQ(ErrorOf(ManyScanJpeg(64, 48, 63), "x.jpg"),  // 127
            ErrorOf(many, "x.jpg"));
}

// A file name is one piece of the message whatever its bytes: a line break
// in it cannot start a line of its own.
TEST(DecodeImage, NamesWithLineBreaksAreQuotedAndEscaped) {
  const std::string m =
      ErrorOf("hello", "cats\ncohort train: finished/x\x01.jpg");
  EXPECT_EQ(m,
            "\"cats\\ncohort train: finished/x\\x01.jpg\": not a JPEG or PNG "
            "file");
  EXPECT_FALSE(absl::StrContains(m, "\n"));
}

// A small file cannot claim a huge image.
TEST(DecodeImage, SizesAreBounded) {
  std::string jpeg = EncodeJpeg(Image());
  const size_t sof = jpeg.find("\xff\xc0");
  jpeg[sof + 5] = jpeg[sof + 7] = '\x7f';  // 32k x 32k
  EXPECT_THAT(ErrorOf(jpeg, "big.jpg"), HasSubstr("big.jpg: an image of "));
  EXPECT_THAT(ErrorOf(jpeg, "big.jpg"), HasSubstr("larger than the limit"));
  std::string png = EncodePng(Image());
  png[16] = '\x01';  // IHDR width: 16M
  EXPECT_THAT(ErrorOf(png, "big.png"), HasSubstr("big.png: corrupt"));
}

// A region decodes to the same pixels as the whole image there; a shrink
// gives the scaled size.
TEST(DecodeImage, JpegRegionAndScale) {
  const Pixels big = SyntheticImage(4, 2, 300, 200);
  const std::string jpeg = EncodeJpeg(big);
  const DecodedImage whole = Decode(jpeg);
  DecodeRequest r;
  r.plan = [](int w, int h) {
    EXPECT_EQ(w, 300);
    EXPECT_EQ(h, 200);
    ImageRegion g;
    g.x = 100, g.y = 50, g.width = 80, g.height = 60;
    return g;
  };
  absl::StatusOr<DecodedImage> part = DecodeImage(jpeg, "p.jpg", r);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->shrink, 1);
  EXPECT_LE(part->x, 99);
  EXPECT_LE(part->y, 49);
  EXPECT_GE(part->x + part->width, 181);
  EXPECT_GE(part->y + part->height, 111);
  EXPECT_LT(part->width, 300);
  EXPECT_LT(part->height, 200);
  int max_diff = 0;
  for (int y = 0; y < part->height; ++y) {
    for (int x = 0; x < part->width * 3; ++x) {
      const int a = part->pixels[y * part->width * 3 + x];
      const int b = whole.pixels[(part->y + y) * 300 * 3 + part->x * 3 + x];
      max_diff = std::max(max_diff, std::abs(a - b));
    }
  }
  EXPECT_EQ(max_diff, 0);
  r.plan = [](int, int) {
    ImageRegion g;
    g.max_shrink = 4;
    return g;
  };
  part = DecodeImage(jpeg, "p.jpg", r);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->shrink, 4);
  EXPECT_EQ(part->scaled_width, 75);
  EXPECT_EQ(part->scaled_height, 50);
  EXPECT_EQ(part->width, 75);
  EXPECT_EQ(part->stored_width, 300);
}

// The plan learns a PNG's size too (the whole image is decoded).
TEST(DecodeImage, PngCallsThePlan) {
  int seen = 0;
  DecodeRequest r;
  r.plan = [&](int w, int h) {
    seen = w * 1000 + h;
    ImageRegion g;
    g.x = 5, g.width = 3, g.height = 3, g.max_shrink = 8;
    return g;
  };
  absl::StatusOr<DecodedImage> d = DecodeImage(EncodePng(Image()), "p.png", r);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(seen, 61047);
  EXPECT_EQ(d->width, 61);
  EXPECT_EQ(d->shrink, 1);
}

}  // namespace
}  // namespace cohort
