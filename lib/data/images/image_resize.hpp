// Crop boxes, sampling windows and the bilinear resize every image transform uses (decoding
// at a DCT scale, RandomResizedCrop, Resize + CenterCrop, data convert --resize).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sdp {

// A rectangle of whole pixels in an image: columns [x, x + w), rows [y, y + h).
struct CropBox {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
  bool operator==(const CropBox& o) const { return x == o.x && y == o.y && w == o.w && h == o.h; }
  // Not empty, and inside a width x height image.
  bool inside(int width, int height) const {
    return x >= 0 && y >= 0 && w > 0 && h > 0 && x + w <= width && y + h <= height;
  }
};

// The region a resize samples, in pixels of the full image: output pixel (ox, oy) of an
// out_w x out_h result takes its value at (x + (ox + 0.5) * w / out_w - 0.5, likewise y),
// bilinear between the four nearest pixels, with coordinates clamped into `clamp` (the
// pixels the sampled image has: the crop box for crop-then-resize, the whole image for
// resize-then-crop).
struct SampleWindow {
  double x = 0, y = 0, w = 0, h = 0;
  CropBox clamp;
  static SampleWindow of_box(const CropBox& box) {
    return {double(box.x), double(box.y), double(box.w), double(box.h), box};
  }
};

// Bilinear resize, torchvision's F.resize(antialias=False) semantics (align_corners=False,
// half-pixel centres, source coordinates clamped to the edge, result rounded to nearest).
// No antialiasing: a downscale by more than 2x skips pixels (aliasing), as torchvision's
// tensor resize with antialias=False does. `src` is an RGB image of src_w x src_h with
// `stride` bytes per row; `window` is in its pixel coordinates and its clamp must lie in it.
void resize_bilinear(const uint8_t* src, int src_w, int src_h, size_t stride,
                     const SampleWindow& window, uint8_t* dst, int out_w, int out_h);

}  // namespace sdp
