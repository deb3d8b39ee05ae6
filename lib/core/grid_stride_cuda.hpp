// The launch shape every element-wise CUDA kernel of sdp-train uses (private: included only
// by *.cu files): grid-stride loops over 256-thread blocks, at most kMaxBlocks blocks (enough
// to fill an H100 several times over; the loop covers the rest).
#pragma once

#include <algorithm>
#include <cstdint>

namespace sdp::cuda_grid {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

inline unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(kMaxBlocks, (n + kThreads - 1) / kThreads)));
}

}  // namespace sdp::cuda_grid

// for (int64_t i = <this thread's first element>; i < n; i += <threads in the grid>)
#define SDP_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)
