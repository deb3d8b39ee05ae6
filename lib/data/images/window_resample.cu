// window_resample_cuda.hpp's kernel.
#include <algorithm>
#include <cmath>

#include "core/cuda_check_cuda.hpp"
#include "core/grid_stride_cuda.hpp"
#include "data/images/window_resample_cuda.hpp"

namespace sdp {

void plan_window_resample(int src_w, int src_h, double x, double y, double w, double h, int clamp_x, int clamp_y,
                          int clamp_w, int clamp_h, int out_w, int out_h, WindowResampleJob& job) {
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
  const int x1 = std::min(scaled_w, static_cast<int>(std::ceil((clamp_x + clamp_w) * s)));
  const int y1 = std::min(scaled_h, static_cast<int>(std::ceil((clamp_y + clamp_h) * s)));
  job.src_w = src_w;
  job.src_h = src_h;
  job.scale_num = num;
  job.region_x0 = x0;
  job.region_y0 = y0;
  job.region_w = x1 - x0;
  job.region_h = y1 - y0;
  job.window_x = x * s - x0;
  job.window_y = y * s - y0;
  job.window_w = w * s;
  job.window_h = h * s;
  job.out_w = out_w;
  job.out_h = out_h;
}

namespace {

// Channel c of the scaled image's pixel (sx, sy) (absolute scaled coordinates): the area
// average of the source pixels it covers, rounded to 8 bits.
__device__ float scaled_pixel(const WindowResampleJob& j, int sx, int sy, int c) {
  if (j.scale_num == 8) return j.src[sy * j.pitch + sx * 3 + c];
  const float f = 8.0f / j.scale_num;
  const float x0 = sx * f, y0 = sy * f;
  const float x1 = fminf((sx + 1) * f, static_cast<float>(j.src_w)), y1 = fminf((sy + 1) * f, static_cast<float>(j.src_h));
  float sum = 0.0f, area = 0.0f;
  for (int y = static_cast<int>(floorf(y0)); y < static_cast<int>(ceilf(y1)); ++y) {
    const float wy = fminf(y + 1.0f, y1) - fmaxf(static_cast<float>(y), y0);
    for (int x = static_cast<int>(floorf(x0)); x < static_cast<int>(ceilf(x1)); ++x) {
      const float wx = fminf(x + 1.0f, x1) - fmaxf(static_cast<float>(x), x0);
      sum += wx * wy * j.src[static_cast<std::size_t>(y) * j.pitch + x * 3 + c];
      area += wx * wy;
    }
  }
  return rintf(sum / area);
}

// image_resize.cpp's tap: the two indices (in the region) and the second's weight.
__device__ void tap(double start, double extent, int out, int o, int hi, int& i0, int& i1, float& w1) {
  double s = start + (o + 0.5) * (extent / out) - 0.5;
  if (s < 0) s = 0;
  if (s > hi - 1) s = hi - 1;
  i0 = static_cast<int>(s);
  i1 = i0 < hi - 1 ? i0 + 1 : i0;
  w1 = static_cast<float>(s - i0);
}

__global__ void window_resample_kernel(const WindowResampleJob* jobs, int64_t max_pixels) {
  const WindowResampleJob& j = jobs[blockIdx.y];
  const int64_t pixels = int64_t{j.out_w} * j.out_h;
  SDP_GRID_STRIDE(p, max_pixels) {
    if (p >= pixels) break;
    const int ox = static_cast<int>(p % j.out_w), oy = static_cast<int>(p / j.out_w);
    int x0, x1, y0, y1;
    float wx, wy;
    tap(j.window_x, j.window_w, j.out_w, ox, j.region_w, x0, x1, wx);
    tap(j.window_y, j.window_h, j.out_h, oy, j.region_h, y0, y1, wy);
    const int ax = j.region_x0 + x0, bx = j.region_x0 + x1, ay = j.region_y0 + y0, by = j.region_y0 + y1;
    uint8_t* out = j.out + (static_cast<std::size_t>(oy) * j.out_w + (j.flip ? j.out_w - 1 - ox : ox)) * 3;
    for (int c = 0; c < 3; ++c) {
      const float p00 = scaled_pixel(j, ax, ay, c), p01 = scaled_pixel(j, bx, ay, c);
      const float p10 = scaled_pixel(j, ax, by, c), p11 = scaled_pixel(j, bx, by, c);
      const float top = p00 + (p01 - p00) * wx, bottom = p10 + (p11 - p10) * wx;
      out[c] = static_cast<uint8_t>(rintf(top + (bottom - top) * wy));
    }
  }
}

}  // namespace

void launch_window_resample(const WindowResampleJob* jobs, int count, int64_t max_pixels, cudaStream_t stream) {
  if (count <= 0) return;
  const dim3 grid(cuda_grid::grid_for(max_pixels), static_cast<unsigned>(count));
  window_resample_kernel<<<grid, cuda_grid::kThreads, 0, stream>>>(jobs, max_pixels);
  check_launch("window_resample_kernel");
}

}  // namespace sdp
