// Per-channel sums of an NCHW tensor on the GPU (private: CUDA-typed; defined in
// channel_sum_cuda.cu): a 16-bit convolution's bias gradient, which cuDNN's
// cudnnConvolutionBackwardBias does not take in bf16.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace sdp::nn::cuda {

// sums[ch] = sum over (i, p) of x[i, ch, p] for plain [n, c, hw] `x` of `dtype`, added in f32
// in a fixed order (the same bits every run), written to the f32 `sums` (overwritten).
void channel_sums(DType dtype, const void* x, float* sums, int64_t n, int64_t c, int64_t hw, cudaStream_t stream);

}  // namespace sdp::nn::cuda
