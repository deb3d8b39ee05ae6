#include "data/images/augment.hpp"

#include "data/loading/random.hpp"

namespace sdp {

CropFlip draw_crop_flip(const AugmentOptions& options, int64_t epoch, int64_t index) {
  // One hash per sample instead of a generator: O(1) and order-independent.
  uint64_t r = mix_keys(options.seed ^ random_stream::kCropFlip, static_cast<uint64_t>(epoch),
                        static_cast<uint64_t>(index));
  const uint64_t span = 2 * static_cast<uint64_t>(options.pad) + 1;
  CropFlip cf;
  // Three independent fields of one 64-bit hash; the modulo bias (span <= 2^21) is negligible.
  cf.dy = static_cast<int>((r & 0x1fffff) % span);
  cf.dx = static_cast<int>(((r >> 21) & 0x1fffff) % span);
  cf.flip = options.flip && ((r >> 63) & 1);
  return cf;
}

void apply_crop_flip(const uint8_t* src, uint8_t* dst, int channels, int h, int w, int pad,
                     const CropFlip& cf) {
  const int64_t plane = int64_t{h} * w;
  for (int c = 0; c < channels; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        int64_t s = crop_flip_source(cf, pad, h, w, y, x);
        dst[c * plane + y * w + x] = s < 0 ? 0 : src[c * plane + s];
      }
}

}  // namespace sdp
