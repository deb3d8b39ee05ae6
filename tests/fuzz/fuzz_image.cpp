// Fuzzes image decoding: read_image_info, ImageDecoder::decode and decode_crop (the
// DCT-scaled region path) on arbitrary bytes. Input layout:
//   bytes 0-1: output width and height of the crop, 1 + b % 64 (bounded: the harness tests
//              the decoder, not the cost of big outputs);
//   bytes 2-5: the crop box as fractions of the image (origin x, y; extent w, h);
//   then the image file's bytes.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "data/images/image_decode.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  const uint8_t* image = data + 6;
  const size_t image_size = size - 6;
  static sdp::ImageDecoder decoder;  // reused across inputs, as a worker reuses it
  sdp::ImageInfo info;
  try {
    info = sdp::read_image_info(image, image_size, "fuzz.img");
  } catch (const sdp::InputError&) {
    // The decoder must reject what the header reader rejects, and not crash doing so.
    try {
      decoder.decode(image, image_size, "fuzz.img");
    } catch (const sdp::InputError&) {
    }
    return 0;
  }
  if (info.width <= 0 || info.height <= 0 ||
      int64_t{info.width} * info.height > sdp::kMaxImagePixels)
    __builtin_trap();
  const int out_w = 1 + data[0] % 64, out_h = 1 + data[1] % 64;
  sdp::CropBox box;
  box.x = static_cast<int>(int64_t{info.width} * data[2] / 256);
  box.y = static_cast<int>(int64_t{info.height} * data[3] / 256);
  box.w = 1 + static_cast<int>(int64_t{info.width - box.x - 1} * data[4] / 255);
  box.h = 1 + static_cast<int>(int64_t{info.height - box.y - 1} * data[5] / 255);
  try {
    const sdp::DecodedImage crop =
        decoder.decode_crop(image, image_size, box, out_w, out_h, "fuzz.img");
    if (crop.width != out_w || crop.height != out_h ||
        crop.pixels.size() != size_t(out_w) * out_h * 3)
      __builtin_trap();
  } catch (const sdp::InputError&) {
  }
  // The full decode allocates the whole image: only for images of at most 4 Mpixels, so a
  // 30-byte header declaring 2^28 pixels does not turn every run into a gigabyte memset.
  if (int64_t{info.width} * info.height > (int64_t{1} << 22)) return 0;
  try {
    const sdp::DecodedImage full = decoder.decode(image, image_size, "fuzz.img");
    // The header and the decoder agree on the size.
    if (full.width != info.width || full.height != info.height ||
        full.pixels.size() != size_t(full.width) * full.height * 3)
      __builtin_trap();
  } catch (const sdp::InputError&) {
  }
  return 0;
}
