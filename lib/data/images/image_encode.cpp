#include "data/images/image_encode.hpp"

#include <turbojpeg.h>

#include <memory>
#include <string>

#include "core/error.hpp"

namespace sdp {

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int channels, int quality,
                                 bool full_chroma) {
  if (channels != 1 && channels != 3) throw std::logic_error("encode_jpeg: 1 or 3 channels");
  // One compressor per thread: TurboJPEG handles are not thread-safe, and making one per image
  // costs more than the small images it encodes.
  thread_local std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitCompress(), tjDestroy);
  if (!handle) throw RuntimeError("tjInitCompress failed");
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int format = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const int subsampling = channels == 1 ? TJSAMP_GRAY : full_chroma ? TJSAMP_444 : TJSAMP_420;
  if (tjCompress2(handle.get(), pixels, width, 0, height, format, &out, &size, subsampling, quality, 0) != 0) {
    const std::string error = tjGetErrorStr2(handle.get());
    tjFree(out);
    throw RuntimeError("JPEG encoding failed: " + error);
  }
  std::vector<uint8_t> jpeg(out, out + size);
  tjFree(out);
  return jpeg;
}

}  // namespace sdp
