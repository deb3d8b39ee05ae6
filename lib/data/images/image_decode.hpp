// Decoding JPEG and PNG bytes into 8-bit interleaved RGB (HWC), the input of the image
// pipelines (docs/data-formats.md, "Decoding images").
//
// JPEG goes through libjpeg-turbo's libjpeg API: it can decode at a DCT scale of n/8 and only
// the rows and iMCU columns a crop needs, which is what makes RandomResizedCrop cheap on
// large photos. PNG goes through libpng (full decode, then crop). Every defect of the bytes
// (not an image, truncated, corrupt, absurd dimensions) is an sdp::InputError naming `what`
// (the file or record), never an exit() or a message on stderr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/images/image_resize.hpp"

namespace sdp {

enum class ImageFormat { kJpeg, kPng };

// What the header says, before any pixel is decoded.
struct ImageInfo {
  int width = 0;
  int height = 0;
  int channels = 0;  // as stored: 1 gray, 2 gray+alpha, 3 colour, 4 RGBA or CMYK
  ImageFormat format = ImageFormat::kJpeg;
};

// The largest image we decode: width * height above this is rejected from the header alone,
// so a 20-byte file cannot make us allocate gigabytes (2^28 pixels = 768 MiB of RGB).
constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

// 8-bit RGB, interleaved, rows top to bottom: pixels.size() == width * height * 3.
struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;
};

// Format and size from the header (JPEG: SOF via TurboJPEG; PNG: signature and IHDR).
ImageInfo read_image_info(const uint8_t* data, size_t size, const std::string& what);

// One per worker thread: it keeps the decompressor's state (and allocations) between images;
// it is not thread-safe.
class ImageDecoder {
 public:
  ImageDecoder();
  ~ImageDecoder();
  ImageDecoder(const ImageDecoder&) = delete;
  ImageDecoder& operator=(const ImageDecoder&) = delete;

  // The whole image, full resolution.
  DecodedImage decode(const uint8_t* data, size_t size, const std::string& what);

  // The box of the image resized to out_w x out_h (RandomResizedCrop). For JPEG it decodes
  // at the smallest DCT scale n/8 at which the box still has at least out_w x out_h pixels,
  // and only the rows and iMCU columns that hold the box; the result differs from
  // decode-then-crop-then-resize only by the DCT scaling's own filtering. `box` must lie in
  // the image (read_image_info's size).
  DecodedImage decode_crop(const uint8_t* data, size_t size, const CropBox& box, int out_w,
                           int out_h, const std::string& what);

  // The general form: the window resized to out_w x out_h (decode_crop is
  // SampleWindow::of_box; the evaluation resize-then-centre-crop has a fractional window).
  DecodedImage decode_window(const uint8_t* data, size_t size, const SampleWindow& window,
                             int out_w, int out_h, const std::string& what);

  struct Jpeg;  // libjpeg state, private to image_decode.cpp

 private:
  std::unique_ptr<Jpeg> jpeg_;
};

}  // namespace sdp
