// CIFAR-style augmentation: random crop back to H x W from the image zero-padded by
// `pad` on every side, then a horizontal flip with probability 1/2 (torchvision
// RandomCrop(32, padding=4) + RandomHorizontalFlip). The draw depends only on
// (seed, epoch, sample index), never on which thread or rank assembles the batch, so
// runs are reproducible and a resumed job augments exactly like an uninterrupted one.
#pragma once

#include <cstdint>

namespace sdp {

struct AugmentOptions {
  bool enabled = false;
  int pad = 4;
  bool flip = true;
  uint64_t seed = 0;
  // Encoded images (encoded_images.hpp): torchvision's RandomResizedCrop + flip (ImageNet's
  // recipe) instead of this padded crop + flip (CIFAR's).
  bool random_resized_crop = false;
};

struct CropFlip {
  int dy = 0;  // crop origin in the padded image, in [0, 2 * pad]
  int dx = 0;
  bool flip = false;
};

CropFlip draw_crop_flip(const AugmentOptions& options, int64_t epoch, int64_t index);

// Source pixel of output (y, x) for a crop/flip, or -1 in the zero padding.
inline int64_t crop_flip_source(const CropFlip& cf, int pad, int h, int w, int y, int x) {
  int sy = y + cf.dy - pad;
  int sx = (cf.flip ? w - 1 - x : x) + cf.dx - pad;
  return (sy < 0 || sy >= h || sx < 0 || sx >= w) ? -1 : int64_t{sy} * w + sx;
}

// Reference byte version (tests; the batch assembler fuses this with normalization).
void apply_crop_flip(const uint8_t* src, uint8_t* dst, int channels, int h, int w, int pad,
                     const CropFlip& cf);

}  // namespace sdp
