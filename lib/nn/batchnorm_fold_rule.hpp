// The per-channel and per-element math of a BatchNorm folded into the convolutions around it
// (model.batchnorm: folded; batchnorm2d_cuda.hpp), written once for both devices
// (core/host_device.hpp): the CUDA kernels run it, and the CPU tests check it against the CPU
// BatchNorm2d with its ReLU (tests/unit/nn/test_cuda_rules.cpp).
//  * forward: the convolution before gives each channel's sum and sum of squares of its output
//    (cuDNN's genstats); fold_batch_statistics turns them into the batch statistics and the
//    scale and bias the convolution after applies as it loads: relu(x * scale + bias) is the
//    BatchNorm's output with its ReLU, never stored.
//  * evaluation: the running statistics' scale and bias (fold_running_statistics), applied the
//    same way; the convolution before sums nothing.
//  * backward: the convolution after gives the gradient through the ReLU (drelu) and its sums
//    dscale = sum(drelu * xhat), dbias = sum(drelu) (cuDNN's dbn_weight); the input gradient is
//    then one pass: dx = a * drelu + b * x + c, its coefficients from those sums.
//  * the branch's last BatchNorm, folded with the block's sum and ReLU: the statistics as above
//    from the convolution before; forward writes y = relu(x * scale + bias + z) and the ReLU's
//    mask, one bit an element; backward (cuDNN's batchnorm backward graph) takes the gradient
//    through that mask, which is also z's gradient, and gives dx as above. A projection
//    shortcut's BatchNorm folds into that pass too (NVIDIA's "dual scale-bias-add-ReLU"): z is
//    then its convolution's output x_sc, normalised in the same pass, x_sc * scale_sc + bias_sc.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace sdp::nn {

struct BatchNormFoldChannel {
  float mean = 0.0f;
  float var = 0.0f;  // biased: what normalizes the batch
  float inv_std = 0.0f;
  float scale = 0.0f;  // gamma * inv_std
  float bias = 0.0f;   // beta - mean * scale
};

// One channel's statistics from `count` values' sum and sum of squares (f32 sums, as genstats
// gives them; the variance clamped at 0 against rounding).
SDP_HOST_DEVICE BatchNormFoldChannel fold_batch_statistics(float sum, float sq_sum, float count, float gamma,
                                                             float beta, float eps) {
  BatchNormFoldChannel c;
  c.mean = sum / count;
  const float var = sq_sum / count - c.mean * c.mean;
  c.var = var > 0.0f ? var : 0.0f;
  c.inv_std = 1.0f / std::sqrt(c.var + eps);
  c.scale = gamma * c.inv_std;
  c.bias = beta - c.mean * c.scale;
  return c;
}

// Evaluation: the scale and bias of the running statistics (what BatchNorm2d's inference
// computes, gamma * (x - mean) / sqrt(var + eps) + beta, as x * scale + bias).
SDP_HOST_DEVICE BatchNormFoldChannel fold_running_statistics(float running_mean, float running_var, float gamma,
                                                             float beta, float eps) {
  BatchNormFoldChannel c;
  c.mean = running_mean;
  c.var = running_var;
  c.inv_std = 1.0f / std::sqrt(running_var + eps);
  c.scale = gamma * c.inv_std;
  c.bias = beta - c.mean * c.scale;
  return c;
}

// The scale and bias of the batch statistics a forward saved (its mean and inverse deviation).
SDP_HOST_DEVICE BatchNormFoldChannel fold_saved_statistics(float mean, float inv_std, float gamma, float beta) {
  BatchNormFoldChannel c;
  c.mean = mean;
  c.inv_std = inv_std;
  c.scale = gamma * inv_std;
  c.bias = beta - mean * c.scale;
  return c;
}

// The running statistics as PyTorch keeps them (batchnorm2d.cpp's update_running_stats_host):
// running = (1 - momentum) running + momentum batch, the variance unbiased by count / (count - 1).
SDP_HOST_DEVICE float batchnorm_running_mean(float running, float mean, float momentum) {
  return (1.0f - momentum) * running + momentum * mean;
}
SDP_HOST_DEVICE float batchnorm_running_var(float running, float var, float count, float momentum) {
  const float unbias = count > 1.0f ? count / (count - 1.0f) : 1.0f;
  return (1.0f - momentum) * running + momentum * var * unbias;
}

// dx = gamma * inv_std * (drelu - dbias / M - xhat * dscale / M), xhat = (x - mean) * inv_std,
// as a * drelu + b * x + c (the form cuDNN's dbn_weight gives its coefficients in).
struct BatchNormInputGradCoefficients {
  float a = 0.0f, b = 0.0f, c = 0.0f;
};

SDP_HOST_DEVICE BatchNormInputGradCoefficients batchnorm_input_grad_coefficients(float dscale, float dbias,
                                                                                 float mean, float inv_std,
                                                                                 float gamma, float count) {
  BatchNormInputGradCoefficients k;
  k.a = gamma * inv_std;
  k.b = -k.a * inv_std * dscale / count;
  k.c = -k.a * dbias / count - k.b * mean;
  return k;
}

SDP_HOST_DEVICE float fold_input_grad_element(const BatchNormInputGradCoefficients& k, float drelu, float x) {
  return k.a * drelu + k.b * x + k.c;
}

// y = relu(x * scale + bias + z): the block's output, from the branch's last BatchNorm folded
// with the sum and ReLU (the scale and bias in f32, as fold_saved_statistics gives them).
SDP_HOST_DEVICE float fold_residual_output_element(const BatchNormFoldChannel& c, float x, float z) {
  const float pre = x * c.scale + c.bias + z;
  return pre > 0.0f ? pre : 0.0f;
}

// The shortcut's term of that sum when its BatchNorm folds in: x_sc * scale_sc + bias_sc.
SDP_HOST_DEVICE float fold_shortcut_element(const BatchNormFoldChannel& c, float x_sc) {
  return x_sc * c.scale + c.bias;
}

// The ReLU's mask as cuDNN's BOOLEAN tensors hold one: a bit an element in the tensor's memory
// order (NHWC here), element j at bit j % 8 of byte j / 8; set where the output is positive.
SDP_HOST_DEVICE int64_t relu_mask_byte(int64_t element) { return element / 8; }
SDP_HOST_DEVICE uint8_t relu_mask_bit(int64_t element) { return static_cast<uint8_t>(1u << (element % 8)); }

}  // namespace sdp::nn
