// ReLU kernels for the layers that fuse a ReLU (Conv2d, BatchNorm2d, max Pool2d on CUDA), the
// arithmetic of elementwise_rule.hpp (private: CUDA-typed; defined in relu_cuda.cu). Tensors
// of `dtype` (f32, f16 or bf16: nn/dtype_cuda.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace sdp::nn::cuda {

// y = relu(y), in place.
void relu_in_place(DType dtype, void* y, int64_t n, cudaStream_t stream);
// dx = dy where the ReLU's output y > 0, else 0.
void relu_backward_from_output(DType dtype, const void* y, const void* dy, void* dx, int64_t n, cudaStream_t stream);
// y = relu(y) in place and mask = (y > 0), for a layer whose output a consumer may overwrite
// before backward (BatchNorm2d: backward_reads_output() is false).
void relu_in_place_with_mask(DType dtype, void* y, uint8_t* mask, int64_t n, cudaStream_t stream);
// dx = mask ? dy : 0.
void relu_backward_from_mask(DType dtype, const uint8_t* mask, const void* dy, void* dx, int64_t n,
                             cudaStream_t stream);

}  // namespace sdp::nn::cuda
