// ReLU kernels for the layers that fuse a ReLU (Conv2d, BatchNorm2d, max Pool2d on CUDA), the
// arithmetic of elementwise_rule.hpp (private: CUDA-typed; defined in relu_cuda.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sdp::nn::cuda {

// y = relu(y), in place.
void relu_in_place(float* y, int64_t n, cudaStream_t stream);
// dx = dy where the ReLU's output y > 0, else 0.
void relu_backward_from_output(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);
// y = relu(y) in place and mask = (y > 0), for a layer whose output a consumer may overwrite
// before backward (BatchNorm2d: backward_reads_output() is false).
void relu_in_place_with_mask(float* y, uint8_t* mask, int64_t n, cudaStream_t stream);
// dx = mask ? dy : 0.
void relu_backward_from_mask(const uint8_t* mask, const float* dy, float* dx, int64_t n, cudaStream_t stream);

}  // namespace sdp::nn::cuda
