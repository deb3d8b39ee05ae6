// Kernels of the channels_last (NHWC) path (private: CUDA-typed; defined in
// channels_last_cuda.cu). The arena keeps PyTorch's OIHW f32 weights, so checkpoints and
// model.safetensors do not change with the layout; a convolution reads a cast OHWI copy and
// its weight gradient is widened back into OIHW. Tensors of `dtype` are f32, f16 or bf16.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace sdp::nn::cuda {

// dst (OHWI, dtype) = src (OIHW, f32), cast and reordered in one pass.
void filter_to_ohwi(DType dtype, void* dst, const float* src, int64_t out, int64_t in, int64_t kh, int64_t kw,
                    cudaStream_t stream);
// dst (OIHW, f32) = src (OHWI, dtype): a weight gradient widened into the arena, overwritten.
void filter_grad_to_oihw(DType dtype, float* dst, const void* src, int64_t out, int64_t in, int64_t kh, int64_t kw,
                         cudaStream_t stream);
// dst (NHWC, dtype) = src (NCHW, f32) of [n, c, hw]: a batch staged for a channels_last model,
// the cast every 16-bit model does anyway (f32: the reorder alone).
void stage_nhwc(DType dtype, void* dst, const float* src, int64_t n, int64_t c, int64_t hw, cudaStream_t stream);
// Inference BatchNorm over NHWC with the running statistics, fused as training is:
// y = [relu](gamma * (x - mean) / sqrt(var + eps) + beta [+ z]); z may be null.
void batchnorm_inference_nhwc(DType dtype, const void* x, const void* z, void* y, const float* gamma,
                              const float* beta, const float* mean, const float* var, float eps, int64_t channels,
                              int64_t count, bool relu, cudaStream_t stream);
// Global average pooling over NHWC [n, hw, c] into [n, c] (the same bytes as NCHW [n, c, 1, 1]),
// summed in f32 in a fixed order; backward spreads dy / hw over every position.
void global_avg_pool_nhwc(DType dtype, const void* x, void* y, int64_t n, int64_t hw, int64_t c,
                          cudaStream_t stream);
void global_avg_pool_nhwc_backward(DType dtype, const void* dy, void* dx, int64_t n, int64_t hw, int64_t c,
                                   cudaStream_t stream);

}  // namespace sdp::nn::cuda
