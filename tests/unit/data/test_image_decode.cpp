#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "data/images/image_decode.hpp"
#include "expect_input_error.hpp"
#include "image_samples.hpp"

namespace sdp {
namespace {

using testing::Bytes;
using testing::encode_jpeg;
using testing::encode_png;
using testing::expect_input_error;
using testing::gradient_rgb;
using testing::make_pixels;
using testing::PngSpec;

double mean_abs_diff(const Bytes& a, const Bytes& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return a.empty() ? 0 : sum / a.size();
}

int max_abs_diff(const Bytes& a, const Bytes& b) {
  int m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

DecodedImage decode(const Bytes& bytes, const std::string& what = "test.img") {
  ImageDecoder decoder;
  return decoder.decode(bytes.data(), bytes.size(), what);
}

TEST(ImageInfo, ReadsJpegAndPngHeaders) {
  const Bytes jpeg = encode_jpeg(gradient_rgb(37, 21), 37, 21);
  ImageInfo info = read_image_info(jpeg.data(), jpeg.size(), "a.jpg");
  EXPECT_EQ(info.format, ImageFormat::kJpeg);
  EXPECT_EQ(info.width, 37);
  EXPECT_EQ(info.height, 21);
  EXPECT_EQ(info.channels, 3);

  const Bytes gray =
      encode_jpeg(make_pixels(8, 9, 1, [](int, int, int) { return 7; }), 8, 9, TJPF_GRAY);
  EXPECT_EQ(read_image_info(gray.data(), gray.size(), "g.jpg").channels, 1);

  PngSpec rgba;
  rgba.colour_type = PNG_COLOR_TYPE_RGBA;
  const Bytes png = encode_png(make_pixels(5, 3, 4, [](int x, int, int) { return x; }), 5, 3, rgba);
  info = read_image_info(png.data(), png.size(), "b.png");
  EXPECT_EQ(info.format, ImageFormat::kPng);
  EXPECT_EQ(info.width, 5);
  EXPECT_EQ(info.height, 3);
  EXPECT_EQ(info.channels, 4);
}

TEST(ImageDecoder, FlatColourJpegDecodesToThatColour) {
  const Bytes flat = make_pixels(48, 32, 3, [](int, int, int c) {
    return c == 0 ? 200 : c == 1 ? 40 : 90;
  });
  const DecodedImage img = decode(encode_jpeg(flat, 48, 32));
  ASSERT_EQ(img.width, 48);
  ASSERT_EQ(img.height, 32);
  ASSERT_EQ(img.pixels.size(), 48u * 32 * 3);
  EXPECT_LE(max_abs_diff(img.pixels, flat), 3);  // JPEG's colour conversion rounds
}

TEST(ImageDecoder, GradientJpegIsCloseToItsSource) {
  const Bytes src = gradient_rgb(64, 40);
  const DecodedImage img = decode(encode_jpeg(src, 64, 40, TJPF_RGB, TJSAMP_444, 98));
  EXPECT_LT(mean_abs_diff(img.pixels, src), 1.5);
}

TEST(ImageDecoder, GrayscaleJpegBecomesRgbWithEqualChannels) {
  const Bytes gray = make_pixels(24, 16, 1, [](int x, int y, int) { return x * 10 + y; });
  const DecodedImage img = decode(encode_jpeg(gray, 24, 16, TJPF_GRAY));
  ASSERT_EQ(img.pixels.size(), 24u * 16 * 3);
  for (size_t p = 0; p < img.pixels.size(); p += 3) {
    EXPECT_EQ(img.pixels[p], img.pixels[p + 1]);
    EXPECT_EQ(img.pixels[p], img.pixels[p + 2]);
  }
  Bytes expected;
  for (uint8_t v : gray) expected.insert(expected.end(), {v, v, v});
  EXPECT_LT(mean_abs_diff(img.pixels, expected), 2.0);
}

TEST(ImageDecoder, ProgressiveJpegDecodesLikeBaseline) {
  const Bytes src = gradient_rgb(50, 30);
  const DecodedImage progressive =
      decode(encode_jpeg(src, 50, 30, TJPF_RGB, TJSAMP_420, 95, TJFLAG_PROGRESSIVE));
  const DecodedImage baseline = decode(encode_jpeg(src, 50, 30));
  ASSERT_EQ(progressive.width, 50);
  EXPECT_LT(mean_abs_diff(progressive.pixels, baseline.pixels), 1.0);
  EXPECT_LT(mean_abs_diff(progressive.pixels, src), 3.0);
}

TEST(ImageDecoder, CmykJpegIsReadAsAdobeInvertedCmyk) {
  // Adobe stores 255 - ink: pure red (no cyan, full magenta and yellow, no black) is stored
  // as (255, 0, 0, 255); and pure grey 50% black as (255, 255, 255, 128).
  const Bytes cmyk = make_pixels(16, 16, 4, [](int x, int, int c) {
    if (x < 8) return c == 0 || c == 3 ? 255 : 0;
    return c == 3 ? 128 : 255;
  });
  const DecodedImage img = decode(encode_jpeg(cmyk, 16, 16, TJPF_CMYK, TJSAMP_444, 100));
  ASSERT_EQ(img.width, 16);
  const uint8_t* red = &img.pixels[(4 * 16 + 2) * 3];
  EXPECT_NEAR(red[0], 255, 3);
  EXPECT_NEAR(red[1], 0, 3);
  EXPECT_NEAR(red[2], 0, 3);
  const uint8_t* grey = &img.pixels[(4 * 16 + 13) * 3];
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(grey[c], 128, 3);
}

TEST(ImageDecoder, PngRgbIsExact) {
  const Bytes src = gradient_rgb(33, 17);
  EXPECT_EQ(decode(testing::encode_png_rgb(src, 33, 17)).pixels, src);
  PngSpec interlaced;
  interlaced.interlaced = true;
  EXPECT_EQ(decode(encode_png(src, 33, 17, interlaced)).pixels, src);
}

TEST(ImageDecoder, Png16BitKeepsTheHighByte) {
  PngSpec spec;
  spec.bit_depth = 16;
  // Sample (x, c): high byte x * 20 + c, low byte 0xff (dropped, as Pillow does).
  const Bytes samples =
      make_pixels(6, 2, 6, [](int x, int, int b) { return b % 2 ? 0xff : x * 20 + b / 2; });
  const DecodedImage img = decode(encode_png(samples, 6, 2, spec));
  const Bytes expected = make_pixels(6, 2, 3, [](int x, int, int c) { return x * 20 + c; });
  EXPECT_EQ(img.pixels, expected);
}

TEST(ImageDecoder, PngPaletteGrayAndAlphaBecomeRgb) {
  PngSpec palette;
  palette.colour_type = PNG_COLOR_TYPE_PALETTE;
  palette.palette = {{10, 20, 30}, {200, 100, 50}};
  DecodedImage img = decode(
      encode_png(make_pixels(4, 2, 1, [](int x, int, int) { return x % 2; }), 4, 2, palette));
  EXPECT_EQ(img.pixels, make_pixels(4, 2, 3, [](int x, int, int c) {
              return x % 2 ? (c == 0 ? 200 : c == 1 ? 100 : 50) : (c + 1) * 10;
            }));

  PngSpec gray_alpha;
  gray_alpha.colour_type = PNG_COLOR_TYPE_GRAY_ALPHA;
  img =
      decode(encode_png(make_pixels(3, 3, 2, [](int x, int y, int c) { return c ? 7 : x * 3 + y; }),
                        3, 3, gray_alpha));
  EXPECT_EQ(img.pixels, make_pixels(3, 3, 3, [](int x, int y, int) { return x * 3 + y; }));

  PngSpec rgba;
  rgba.colour_type = PNG_COLOR_TYPE_RGBA;
  img = decode(encode_png(
      make_pixels(3, 2, 4, [](int x, int, int c) { return c == 3 ? 0 : x + c; }), 3, 2, rgba));
  EXPECT_EQ(img.pixels,
            make_pixels(3, 2, 3, [](int x, int, int c) { return x + c; }));  // alpha dropped

  PngSpec gray1;
  gray1.colour_type = PNG_COLOR_TYPE_GRAY;
  gray1.bit_depth = 1;
  // One row of 8 pixels packed in one byte 0b10110000: 1-bit gray expands to 0 / 255.
  img = decode(encode_png(Bytes{0xb0}, 8, 1, gray1));
  const int bits[8] = {1, 0, 1, 1, 0, 0, 0, 0};
  for (int x = 0; x < 8; ++x) EXPECT_EQ(img.pixels[x * 3 + 1], bits[x] * 255) << x;
}

TEST(ResizeBilinear, MatchesTorchvisionWithoutAntialias) {
  // torch: F.resize(t, [1, 2], antialias=False) of [10 20 30 40] samples at 0.5 and 2.5.
  const Bytes row4 = make_pixels(4, 1, 3, [](int x, int, int) { return 10 * (x + 1); });
  Bytes out(2 * 3);
  resize_bilinear(row4.data(), 4, 1, 12, SampleWindow::of_box({0, 0, 4, 1}), out.data(), 2, 1);
  EXPECT_EQ(out, make_pixels(2, 1, 3, [](int x, int, int) { return x ? 35 : 15; }));
  // Upscale [10 20] to 4: samples at -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1):
  // 10, 12.5, 17.5, 20, rounded half to even as torch.round does.
  const Bytes row2 = make_pixels(2, 1, 3, [](int x, int, int) { return 10 * (x + 1); });
  Bytes up(4 * 3);
  resize_bilinear(row2.data(), 2, 1, 6, SampleWindow::of_box({0, 0, 2, 1}), up.data(), 4, 1);
  const int expected[4] = {10, 12, 18, 20};
  for (int x = 0; x < 4; ++x) EXPECT_EQ(up[x * 3], expected[x]) << x;
  // Same size is the identity.
  const Bytes src = gradient_rgb(9, 7);
  Bytes same(src.size());
  resize_bilinear(src.data(), 9, 7, 27, SampleWindow::of_box({0, 0, 9, 7}), same.data(), 9, 7);
  EXPECT_EQ(same, src);
}

TEST(ResizeBilinear, ClampsToTheCropNotTheImage) {
  // Upscaling a crop samples outside it at the edges; torchvision crops first, so the
  // neighbours outside the crop (here 250) must not leak in.
  const Bytes src =
      make_pixels(6, 1, 3, [](int x, int, int) { return x == 2 || x == 3 ? 100 : 250; });
  Bytes out(8 * 3);
  resize_bilinear(src.data(), 6, 1, 18, SampleWindow::of_box({2, 0, 2, 1}), out.data(), 8, 1);
  for (uint8_t v : out) EXPECT_EQ(v, 100);
}

// decode_crop against the reference: full decode, crop, then the same bilinear resize.
void expect_crop_close_to_reference(const Bytes& jpeg, const CropBox& box, int out_w, int out_h,
                                    double mean_tolerance) {
  ImageDecoder decoder;
  const DecodedImage full = decoder.decode(jpeg.data(), jpeg.size(), "x.jpg");
  Bytes reference(size_t(out_w) * out_h * 3);
  resize_bilinear(full.pixels.data(), full.width, full.height, size_t(full.width) * 3,
                  SampleWindow::of_box(box), reference.data(), out_w, out_h);
  const DecodedImage crop =
      decoder.decode_crop(jpeg.data(), jpeg.size(), box, out_w, out_h, "x.jpg");
  ASSERT_EQ(crop.width, out_w);
  ASSERT_EQ(crop.height, out_h);
  EXPECT_LT(mean_abs_diff(crop.pixels, reference), mean_tolerance)
      << "box " << box.x << "," << box.y << " " << box.w << "x" << box.h;
}

TEST(ImageDecoder, CropPathMatchesFullDecodeThenCropThenResize) {
  const int w = 640, h = 480;
  const Bytes jpeg = encode_jpeg(gradient_rgb(w, h), w, h);
  expect_crop_close_to_reference(jpeg, {100, 50, 400, 300}, 112, 112, 0.6);  // DCT scale 3/8
  expect_crop_close_to_reference(jpeg, {0, 0, w, h}, 80, 60, 0.6);           // scale 1/8
  expect_crop_close_to_reference(jpeg, {333, 201, 97, 61}, 90, 60,
                                 0.1);  // scale 1, odd offsets: exact
  expect_crop_close_to_reference(jpeg, {600, 440, 40, 40}, 224, 224,
                                 0.1);  // upscale, last iMCU: exact
  // Progressive and grayscale sources take the same path.
  const Bytes progressive =
      encode_jpeg(gradient_rgb(w, h), w, h, TJPF_RGB, TJSAMP_420, 90, TJFLAG_PROGRESSIVE);
  expect_crop_close_to_reference(progressive, {17, 33, 500, 400}, 224, 224, 0.6);
  const Bytes gray = encode_jpeg(
      make_pixels(w, h, 1, [](int x, int y, int) { return (x + 2 * y) % 256; }), w, h, TJPF_GRAY);
  expect_crop_close_to_reference(gray, {64, 64, 256, 256}, 64, 64, 2.5);
}

TEST(ImageDecoder, PngCropIsCropThenResize) {
  const Bytes src = gradient_rgb(50, 40);
  const Bytes png = testing::encode_png_rgb(src, 50, 40);
  ImageDecoder decoder;
  const DecodedImage crop =
      decoder.decode_crop(png.data(), png.size(), {10, 5, 20, 30}, 20, 30, "p.png");
  const Bytes expected = make_pixels(
      20, 30, 3, [&](int x, int y, int c) { return src[((y + 5) * 50 + x + 10) * 3 + c]; });
  EXPECT_EQ(crop.pixels, expected);
}

TEST(ImageDecoder, RejectsBytesThatAreNoImage) {
  std::mt19937_64 rng(5);
  Bytes noise(1000);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  noise[0] = 0x12;
  ImageDecoder decoder;
  expect_input_error([&] { decoder.decode(noise.data(), noise.size(), "noise.jpg"); },
                     {"noise.jpg", "not a JPEG or PNG"});
  expect_input_error([&] { read_image_info(noise.data(), noise.size(), "noise.jpg"); },
                     {"noise.jpg"});
  expect_input_error([&] { decoder.decode(noise.data(), 0, "empty.png"); }, {"empty.png"});
  // A JPEG signature followed by noise.
  noise[0] = 0xff, noise[1] = 0xd8, noise[2] = 0xff;
  expect_input_error([&] { decoder.decode(noise.data(), noise.size(), "fake.jpg"); },
                     {"fake.jpg", "JPEG"});
}

TEST(ImageDecoder, RejectsTruncatedFilesAndStaysUsable) {
  const Bytes jpeg = encode_jpeg(gradient_rgb(64, 64), 64, 64);
  const Bytes progressive =
      encode_jpeg(gradient_rgb(64, 64), 64, 64, TJPF_RGB, TJSAMP_420, 90, TJFLAG_PROGRESSIVE);
  const Bytes png = testing::encode_png_rgb(gradient_rgb(64, 64), 64, 64);
  ImageDecoder decoder;
  for (const Bytes* file : {&jpeg, &progressive, &png}) {
    for (size_t keep : {file->size() / 2, file->size() * 9 / 10, size_t{40}}) {
      expect_input_error([&] { decoder.decode(file->data(), keep, "cut.img"); }, {"cut.img"});
      expect_input_error(
          [&] {
            decoder.decode_crop(file->data(), keep, {0, 0, 64, 64}, 32, 32, "cut.img");
          },
          {"cut.img"});
    }
    // The decoder recovers: the next image decodes.
    EXPECT_EQ(decoder.decode(file->data(), file->size(), "whole.img").width, 64);
  }
  const std::string msg = expect_input_error(
      [&] { decoder.decode(jpeg.data(), jpeg.size() / 2, "half.jpg"); }, {"half.jpg"});
  EXPECT_NE(msg.find("Premature end"), std::string::npos) << msg;
}

TEST(ImageDecoder, RejectsAbsurdDimensionsFromTheHeader) {
  Bytes jpeg = encode_jpeg(gradient_rgb(16, 16), 16, 16);
  // Patch the SOF0 frame header (FF C0, length, precision, height, width) to 60000 x 60000.
  size_t sof = 0;
  for (size_t i = 2; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {
      sof = i;
      break;
    }
  ASSERT_GT(sof, 0u);
  jpeg[sof + 5] = 0xea, jpeg[sof + 6] = 0x60, jpeg[sof + 7] = 0xea, jpeg[sof + 8] = 0x60;
  ImageDecoder decoder;
  expect_input_error([&] { read_image_info(jpeg.data(), jpeg.size(), "huge.jpg"); },
                     {"huge.jpg", "60000x60000", "limit"});
  expect_input_error([&] { decoder.decode(jpeg.data(), jpeg.size(), "huge.jpg"); },
                     {"huge.jpg", "limit"});

  Bytes png = testing::encode_png_rgb(gradient_rgb(4, 4), 4, 4);
  png[16] = 0x00, png[17] = 0x01, png[18] = 0x00, png[19] = 0x00;  // width 65536
  png[20] = 0x00, png[21] = 0x01, png[22] = 0x00, png[23] = 0x00;  // height 65536
  expect_input_error([&] { decoder.decode(png.data(), png.size(), "huge.png"); },
                     {"huge.png", "limit"});
  // Sides near 2^32 (the fuzzer's find): their product overflows 64 bits if computed first.
  for (int i = 16; i < 24; ++i) png[i] = 0xff;
  expect_input_error([&] { read_image_info(png.data(), png.size(), "huger.png"); },
                     {"huger.png", "4294967295x4294967295", "limit"});
}

TEST(ImageDecoder, RejectsAProgressiveJpegTooBigForTheDecoderMemoryCapBeforeAllocating) {
  // 16000 x 16000 is under the pixel limit, but progressive 4:4:4 needs every DCT
  // coefficient in memory (1.5 GB): libjpeg's cap refuses it, before our 768 MB pixel buffer.
  Bytes jpeg =
      encode_jpeg(gradient_rgb(16, 16), 16, 16, TJPF_RGB, TJSAMP_444, 90, TJFLAG_PROGRESSIVE);
  size_t sof = 0;
  for (size_t i = 2; i + 1 < jpeg.size() && sof == 0; ++i)
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc2) sof = i;  // SOF2: progressive
  ASSERT_GT(sof, 0u);
  jpeg[sof + 5] = 0x3e, jpeg[sof + 6] = 0x80, jpeg[sof + 7] = 0x3e, jpeg[sof + 8] = 0x80;
  ImageDecoder decoder;
  expect_input_error([&] { decoder.decode(jpeg.data(), jpeg.size(), "big.jpg"); },
                     {"big.jpg", "decoder memory"});
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss, 400 * 1024) << "peak RSS in KiB";
}

}  // namespace
}  // namespace sdp
