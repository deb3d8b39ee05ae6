// The resampling kernel of nvjpeg_offload_cuda.cpp (private: CUDA-typed): a decoded image's
// window to the output size, as the CPU's decode_window does it (image_decode.cpp's
// jpeg_window): the DCT scale n/8 the CPU decoder would pick (emulated here by an area
// average of 8/n source pixels, rounded to 8 bits as the scaled decode rounds), then
// image_resize.cpp's bilinear taps on the scaled window, rounded to nearest; then the flip.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sdp {

struct WindowResampleJob {
  const uint8_t* src = nullptr;  // RGB interleaved, `pitch` bytes a row, device memory
  std::size_t pitch = 0;
  int src_w = 0, src_h = 0;
  int scale_num = 8;             // the CPU decoder's DCT scale n/8
  int region_x0 = 0, region_y0 = 0, region_w = 0, region_h = 0;  // in the scaled image
  double window_x = 0, window_y = 0, window_w = 0, window_h = 0;  // in the region's pixels
  uint8_t* out = nullptr;        // out_w * out_h * 3 bytes, device memory
  int out_w = 0, out_h = 0;
  int flip = 0;
};

// Fills `job` from the image size and the window (SampleWindow's x, y, w, h and clamp box)
// exactly as jpeg_window scales them.
void plan_window_resample(int src_w, int src_h, double x, double y, double w, double h, int clamp_x, int clamp_y,
                          int clamp_w, int clamp_h, int out_w, int out_h, WindowResampleJob& job);

// Runs `count` jobs (an array in device memory) on `stream`; `max_pixels` is the largest
// out_w * out_h among them.
void launch_window_resample(const WindowResampleJob* jobs, int count, int64_t max_pixels, cudaStream_t stream);

}  // namespace sdp
