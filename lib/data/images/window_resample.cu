// window_resample_cuda.hpp's kernel: one thread per output pixel of each job (blockIdx.y).
#include "core/cuda_check_cuda.hpp"
#include "core/grid_stride_cuda.hpp"
#include "data/images/window_resample_cuda.hpp"

namespace sdp {

namespace {

__global__ void window_resample_kernel(const WindowResampleJob* jobs, int64_t max_pixels) {
  const WindowResampleJob& j = jobs[blockIdx.y];
  const int64_t pixels = int64_t{j.out_w} * j.out_h;
  SDP_GRID_STRIDE(p, max_pixels) {
    if (p >= pixels) break;
    resample_pixel(j, static_cast<int>(p % j.out_w), static_cast<int>(p / j.out_w));
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
