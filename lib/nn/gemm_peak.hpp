// A quick single-node SGEMM measurement (oneDNN's sgemm, the kernel inside our linear
// layers), used by `sdp-train bench gemm` to report what the CPU can deliver.
#pragma once

namespace sdp::nn {

// Best-of-several GFLOP/s of an n x n x n f32 GEMM with the current thread count.
double measure_sgemm_gflops(int n);

}  // namespace sdp::nn
