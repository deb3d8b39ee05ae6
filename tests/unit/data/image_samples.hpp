// Test images made in code (no binary files in the tree): JPEGs through TurboJPEG's
// compressor, PNGs through libpng's writer, from pixel patterns the tests can predict.
#pragma once

#include <png.h>
#include <turbojpeg.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/sets/encoded_images.hpp"

namespace sdp::testing {

// EncodedImageSet options for the small test images: 16x16 crops of an 18-pixel resize, the
// normalization the tests predict (mean 0.5, std 0.25).
inline EncodedImageOptions small_images(int num_classes, int workers = 2) {
  EncodedImageOptions options;
  options.image_size = 16;
  options.resize = 18;
  options.num_classes = num_classes;
  options.workers = workers;
  options.normalization = {{0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};
  return options;
}

using Bytes = std::vector<uint8_t>;

// An interleaved image of `channels` bytes per pixel, value(x, y, channel).
inline Bytes make_pixels(int w, int h, int channels,
                         const std::function<int(int, int, int)>& value) {
  Bytes p(size_t(w) * h * channels);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        p[(size_t(y) * w + x) * channels + c] = static_cast<uint8_t>(value(x, y, c));
  return p;
}

// A smooth RGB pattern (JPEG keeps it well): horizontal ramp in R, vertical in G, mix in B.
inline Bytes gradient_rgb(int w, int h) {
  return make_pixels(w, h, 3, [&](int x, int y, int c) {
    return c == 0 ? x * 255 / (w - 1) : c == 1 ? y * 255 / (h - 1) : (x + y) * 255 / (w + h - 2);
  });
}

// pixel_format: TJPF_RGB, TJPF_GRAY or TJPF_CMYK; subsampling TJSAMP_*; flags e.g.
// TJFLAG_PROGRESSIVE.
inline Bytes encode_jpeg(const Bytes& pixels, int w, int h, int pixel_format = TJPF_RGB,
                         int subsampling = TJSAMP_420, int quality = 95, int flags = 0) {
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (pixel_format == TJPF_GRAY) subsampling = TJSAMP_GRAY;
  const int rc = tjCompress2(tj, pixels.data(), w, 0, h, pixel_format, &out, &size, subsampling,
                             quality, flags);
  const std::string error = rc == 0 ? "" : tjGetErrorStr2(tj);
  tjDestroy(tj);
  if (rc != 0) throw std::runtime_error("tjCompress2: " + error);
  Bytes jpeg(out, out + size);
  tjFree(out);
  return jpeg;
}

struct PngSpec {
  int colour_type = PNG_COLOR_TYPE_RGB;
  int bit_depth = 8;
  std::vector<png_color> palette;  // PNG_COLOR_TYPE_PALETTE
  bool interlaced = false;
};

// `samples`: bit_depth 8: one byte per sample; 16: two bytes, big-endian (as PNG stores
// them); palette: one index byte per pixel.
inline Bytes encode_png(const Bytes& samples, int w, int h, const PngSpec& spec) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  Bytes out;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("libpng write failed");
  }
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, png_size_t n) {
        auto* o = static_cast<Bytes*>(png_get_io_ptr(p));
        o->insert(o->end(), data, data + n);
      },
      nullptr);
  png_set_IHDR(png, info, w, h, spec.bit_depth, spec.colour_type,
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (spec.colour_type == PNG_COLOR_TYPE_PALETTE)
    png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
  png_write_info(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  std::vector<png_bytep> rows(h);
  for (int y = 0; y < h; ++y)
    rows[y] = const_cast<uint8_t*>(samples.data()) + size_t(y) * row_bytes;
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

inline Bytes encode_png_rgb(const Bytes& rgb, int w, int h) {
  return encode_png(rgb, w, h, PngSpec{});
}

}  // namespace sdp::testing
