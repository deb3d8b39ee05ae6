// The resampling of data.decode: gpu (nvjpeg_offload_cuda.cpp), written once for both devices
// (core/host_device.hpp): a fully decoded image's window to the output size as the CPU's
// decode_window does it (image_decode.cpp's jpeg_window): the DCT scale n/8 libjpeg would
// pick, emulated by an area average of 8/n source pixels rounded to 8 bits as the scaled
// decode rounds, then image_resize.cpp's bilinear taps on the scaled window, rounded to
// nearest; then the flip; and with data.normalize: gpu the lookup of each value in the
// batch's normalisation table. The CUDA kernel (window_resample.cu) and resample_on_host (the
// CPU tests' reference) run the same per-pixel function.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/host_device.hpp"

namespace sdp {

struct WindowResampleJob {
  const uint8_t* src = nullptr;  // RGB interleaved, `pitch` bytes a row (device memory on a GPU)
  std::size_t pitch = 0;
  int src_w = 0, src_h = 0;      // the whole image's size
  // Where `src` starts in the image: (0, 0) for a whole decode; a decode of the region alone
  // (window_source_rect) starts at its corner. The geometry below stays the image's.
  int src_x0 = 0, src_y0 = 0;
  int scale_num = 8;             // the CPU decoder's DCT scale n/8
  int region_x0 = 0, region_y0 = 0, region_w = 0, region_h = 0;  // in the scaled image
  double window_x = 0, window_y = 0, window_w = 0, window_h = 0;  // in the region's pixels
  uint8_t* out = nullptr;        // out_w * out_h * 3 bytes
  int out_w = 0, out_h = 0;
  int flip = 0;
  // data.normalize: gpu: when `normalized` is set, each 8-bit value is looked up in `table`
  // (NormalizationTable's values: 3 x 256 elements of element_bytes, device memory on a GPU)
  // and the sample is written there as the batch holds it (planar, or interleaved when hwc),
  // instead of into `out`.
  void* normalized = nullptr;
  const uint8_t* table = nullptr;
  int element_bytes = 4;  // 4: f32; 2: f16 or bf16 bits
  int hwc = 0;
};

// Fills `job`'s geometry from the image size and the window (SampleWindow's x, y, w, h and
// clamp box) exactly as jpeg_window scales them.
inline void plan_window_resample(int src_w, int src_h, double x, double y, double w, double h, int clamp_x,
                                 int clamp_y, int clamp_w, int clamp_h, int out_w, int out_h, WindowResampleJob& job) {
  // jpeg_window's choice: the smallest n/8 at which the window keeps out_w x out_h pixels.
  int num = 8;
  for (int n = 1; n < 8; ++n)
    if (w * n >= 8.0 * out_w && h * n >= 8.0 * out_h) {
      num = n;
      break;
    }
  const double s = num / 8.0;
  const int scaled_w = static_cast<int>((int64_t{src_w} * num + 7) / 8);
  const int scaled_h = static_cast<int>((int64_t{src_h} * num + 7) / 8);
  const int x0 = static_cast<int>(std::floor(clamp_x * s)), y0 = static_cast<int>(std::floor(clamp_y * s));
  const int x1 = static_cast<int>(std::ceil((clamp_x + clamp_w) * s)), y1 = static_cast<int>(std::ceil((clamp_y + clamp_h) * s));
  job.src_w = src_w;
  job.src_h = src_h;
  job.scale_num = num;
  job.region_x0 = x0;
  job.region_y0 = y0;
  job.region_w = (x1 < scaled_w ? x1 : scaled_w) - x0;
  job.region_h = (y1 < scaled_h ? y1 : scaled_h) - y0;
  job.window_x = x * s - x0;
  job.window_y = y * s - y0;
  job.window_w = w * s;
  job.window_h = h * s;
  job.out_w = out_w;
  job.out_h = out_h;
}

// The source pixels a job reads, in the image's coordinates: the scaled pixels of its region
// (the taps stay inside it), each the area average of the 8/n source pixels it covers; widened
// to multiples of `align` (a decoder's block) within the image. A decode of this rectangle
// alone, with src_x0/src_y0 at its corner, resamples to the same bits as a whole decode.
struct SourceRect {
  int x = 0, y = 0, w = 0, h = 0;
};
inline SourceRect window_source_rect(const WindowResampleJob& j, int align = 1) {
  const float f = 8.0f / j.scale_num;  // as resample_scaled_pixel computes it
  int x0 = j.region_x0, y0 = j.region_y0, x1 = j.region_x0 + j.region_w, y1 = j.region_y0 + j.region_h;
  if (j.scale_num != 8) {
    x0 = static_cast<int>(std::floor(x0 * f));
    y0 = static_cast<int>(std::floor(y0 * f));
    x1 = static_cast<int>(std::ceil(std::fmin(x1 * f, static_cast<float>(j.src_w))));
    y1 = static_cast<int>(std::ceil(std::fmin(y1 * f, static_cast<float>(j.src_h))));
  }
  x0 = x0 / align * align;
  y0 = y0 / align * align;
  x1 = std::min(j.src_w, (x1 + align - 1) / align * align);
  y1 = std::min(j.src_h, (y1 + align - 1) / align * align);
  return {x0, y0, x1 - x0, y1 - y0};
}

// Channel c of the image's pixel (x, y), wherever `src` starts.
SDP_HOST_DEVICE uint8_t resample_source(const WindowResampleJob& j, int x, int y, int c) {
  return j.src[static_cast<std::size_t>(y - j.src_y0) * j.pitch + static_cast<std::size_t>(x - j.src_x0) * 3 + c];
}

// Channel c of the scaled image's pixel (sx, sy) (absolute scaled coordinates): the area
// average of the source pixels it covers, rounded to 8 bits.
SDP_HOST_DEVICE float resample_scaled_pixel(const WindowResampleJob& j, int sx, int sy, int c) {
  if (j.scale_num == 8) return resample_source(j, sx, sy, c);
  const float f = 8.0f / j.scale_num;
  const float x0 = sx * f, y0 = sy * f;
  const float x1 = fminf((sx + 1) * f, static_cast<float>(j.src_w)), y1 = fminf((sy + 1) * f, static_cast<float>(j.src_h));
  float sum = 0.0f, area = 0.0f;
  for (int y = static_cast<int>(floorf(y0)); y < static_cast<int>(ceilf(y1)); ++y) {
    const float wy = fminf(y + 1.0f, y1) - fmaxf(static_cast<float>(y), y0);
    for (int x = static_cast<int>(floorf(x0)); x < static_cast<int>(ceilf(x1)); ++x) {
      const float wx = fminf(x + 1.0f, x1) - fmaxf(static_cast<float>(x), x0);
      sum += wx * wy * resample_source(j, x, y, c);
      area += wx * wy;
    }
  }
  return rintf(sum / area);
}

// image_resize.cpp's tap: the two indices (in the region) and the second's weight.
SDP_HOST_DEVICE void resample_tap(double start, double extent, int out, int o, int hi, int& i0, int& i1, float& w1) {
  double s = start + (o + 0.5) * (extent / out) - 0.5;
  if (s < 0) s = 0;
  if (s > hi - 1) s = hi - 1;
  i0 = static_cast<int>(s);
  i1 = i0 < hi - 1 ? i0 + 1 : i0;
  w1 = static_cast<float>(s - i0);
}

// Output pixel (ox, oy) of job j, written where the flip puts it.
SDP_HOST_DEVICE void resample_pixel(const WindowResampleJob& j, int ox, int oy) {
  int x0, x1, y0, y1;
  float wx, wy;
  resample_tap(j.window_x, j.window_w, j.out_w, ox, j.region_w, x0, x1, wx);
  resample_tap(j.window_y, j.window_h, j.out_h, oy, j.region_h, y0, y1, wy);
  const int ax = j.region_x0 + x0, bx = j.region_x0 + x1, ay = j.region_y0 + y0, by = j.region_y0 + y1;
  const std::size_t pixel = static_cast<std::size_t>(oy) * j.out_w + (j.flip ? j.out_w - 1 - ox : ox);
  for (int c = 0; c < 3; ++c) {
    const float p00 = resample_scaled_pixel(j, ax, ay, c), p01 = resample_scaled_pixel(j, bx, ay, c);
    const float p10 = resample_scaled_pixel(j, ax, by, c), p11 = resample_scaled_pixel(j, bx, by, c);
    const float top = p00 + (p01 - p00) * wx, bottom = p10 + (p11 - p10) * wx;
    const auto value = static_cast<uint8_t>(rintf(top + (bottom - top) * wy));
    if (j.normalized == nullptr) {
      j.out[pixel * 3 + c] = value;
      continue;
    }
    const std::size_t plane = static_cast<std::size_t>(j.out_w) * j.out_h;
    const std::size_t at = j.hwc ? pixel * 3 + c : c * plane + pixel;
    const std::size_t entry = static_cast<std::size_t>(c) * 256 + value;
    if (j.element_bytes == 4)
      static_cast<float*>(j.normalized)[at] = reinterpret_cast<const float*>(j.table)[entry];
    else
      static_cast<uint16_t*>(j.normalized)[at] = reinterpret_cast<const uint16_t*>(j.table)[entry];
  }
}

// The same on the host, every pixel: the CPU tests' reference of the kernel.
inline void resample_on_host(const WindowResampleJob& j) {
  for (int oy = 0; oy < j.out_h; ++oy)
    for (int ox = 0; ox < j.out_w; ++ox) resample_pixel(j, ox, oy);
}

}  // namespace sdp
