// Kernels of a BatchNorm folded into the convolutions around it (private: CUDA-typed; defined
// in batchnorm_fold_cuda.cu; the math is nn/batchnorm_fold_rule.hpp's). Activations are NHWC of
// `dtype` (f16 or bf16); statistics, parameters and their gradients f32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace sdp::nn::cuda {

// One thread per channel: the batch's mean and inverse deviation (kept for backward), the
// running statistics updated, and the scale and bias the next convolution applies as it loads
// (in `dtype`, as cuDNN's fused engines take them). `count` values per channel.
void batchnorm_fold_finalize(DType dtype, const float* sum, const float* sq_sum, int64_t count, const float* gamma,
                             const float* beta, float eps, float momentum, float* running_mean, float* running_var,
                             float* save_mean, float* save_inv_std, void* scale, void* bias, int64_t channels,
                             cudaStream_t stream);

// Evaluation: one thread per channel, the scale and bias of the running statistics (in `dtype`).
void batchnorm_fold_inference(DType dtype, const float* running_mean, const float* running_var, const float* gamma,
                              const float* beta, float eps, void* scale, void* bias, int64_t channels,
                              cudaStream_t stream);

// dx = a * drelu + b * x + c over NHWC [numel / channels, channels], each channel's coefficients
// from dscale, dbias, the saved mean and inverse deviation and gamma.
void batchnorm_fold_input_grad(DType dtype, const void* drelu, const void* x, const float* dscale, const float* dbias,
                               const float* mean, const float* inv_std, const float* gamma, int64_t count, void* dx,
                               int64_t channels, int64_t numel, cudaStream_t stream);

// A BatchNorm's saved batch statistics and parameters (f32, per channel).
struct FoldedStatistics {
  const float* mean = nullptr;
  const float* inv_std = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
};

// The branch's last BatchNorm folded with the block's sum: y = relu(x * scale + bias + z) over NHWC
// [numel / channels, channels], each channel's scale and bias from `bn`'s statistics; with
// `shortcut` (its mean not null: a projection shortcut's BatchNorm folded in too) z is its
// convolution's output, normalised as it is read. `mask` gets the ReLU's bits (numel / 8 bytes,
// rounded up; batchnorm_fold_rule.hpp's order), what cuDNN's batchnorm backward graph reads.
void batchnorm_fold_residual_output(DType dtype, const void* x, const void* z, const FoldedStatistics& bn,
                                    const FoldedStatistics& shortcut, void* y, uint8_t* mask, int64_t channels,
                                    int64_t numel, cudaStream_t stream);

}  // namespace sdp::nn::cuda
