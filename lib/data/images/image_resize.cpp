// The bilinear resize of image_resize.hpp.
#include "data/images/image_resize.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace sdp {

namespace {

// Per output coordinate: the two source indices and the weight of the second, torchvision's
// upsample_bilinear2d (align_corners=False) with the source coordinate clamped into [lo, hi).
struct Tap {
  int i0, i1;
  float w1;
};

std::vector<Tap> taps(double start, double extent, int out, int lo, int hi) {
  std::vector<Tap> t(out);
  const double scale = extent / out;
  for (int o = 0; o < out; ++o) {
    double s = start + (o + 0.5) * scale - 0.5;
    if (s < lo) s = lo;
    if (s > hi - 1) s = hi - 1;
    const int i0 = static_cast<int>(s);  // s >= lo >= 0: truncation is floor
    t[o] = {i0, i0 < hi - 1 ? i0 + 1 : i0, static_cast<float>(s - i0)};
  }
  return t;
}

}  // namespace

void resize_bilinear(const uint8_t* src, int src_w, int src_h, size_t stride,
                     const SampleWindow& window, uint8_t* dst, int out_w, int out_h) {
  const CropBox& c = window.clamp;
  if (out_w <= 0 || out_h <= 0 || !c.inside(src_w, src_h) || !(window.w > 0) || !(window.h > 0))
    throw std::invalid_argument("resize_bilinear: empty output or clamp box outside the source");
  const std::vector<Tap> xs = taps(window.x, window.w, out_w, c.x, c.x + c.w);
  const std::vector<Tap> ys = taps(window.y, window.h, out_h, c.y, c.y + c.h);
  for (int oy = 0; oy < out_h; ++oy) {
    const uint8_t* r0 = src + ys[oy].i0 * stride;
    const uint8_t* r1 = src + ys[oy].i1 * stride;
    const float wy = ys[oy].w1;
    uint8_t* out = dst + size_t(oy) * out_w * 3;
    for (int ox = 0; ox < out_w; ++ox) {
      const int a = xs[ox].i0 * 3, b = xs[ox].i1 * 3;
      const float wx = xs[ox].w1;
      for (int k = 0; k < 3; ++k) {
        const float top = r0[a + k] + (r0[b + k] - r0[a + k]) * wx;
        const float bottom = r1[a + k] + (r1[b + k] - r1[a + k]) * wx;
        // Round to nearest, as torchvision does when it casts the float result back to uint8.
        out[ox * 3 + k] = static_cast<uint8_t>(std::nearbyintf(top + (bottom - top) * wy));
      }
    }
  }
}

}  // namespace sdp
