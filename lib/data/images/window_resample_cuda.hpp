// The launch of window_resample.hpp's per-pixel function over a batch of jobs (private:
// CUDA-typed; nvjpeg_offload_cuda.cpp's).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "data/images/window_resample.hpp"

namespace sdp {

// Runs `count` jobs (an array in device memory, their images in device memory) on `stream`;
// `max_pixels` is the largest out_w * out_h among them.
void launch_window_resample(const WindowResampleJob* jobs, int count, int64_t max_pixels, cudaStream_t stream);

}  // namespace sdp
