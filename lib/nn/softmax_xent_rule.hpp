// Softmax cross-entropy of one row of logits, written once for both devices
// (core/host_device.hpp): the CPU loss (softmax_cross_entropy_cpu.cpp) calls it for every
// sample, the CUDA kernel (softmax_xent_cuda.cu) in one thread per sample.
//
// With label smoothing e over K classes the target q is e / K off the label and
// 1 - e + e / K on it. The row's loss is -sum_j q_j log softmax(z)_j; its gradient
// (softmax(z) - q) / N is written to `grad` (N = the batch, through inv_n).
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.hpp"

namespace sdp::nn {

struct XentTarget {
  float off = 0.0f;  // q_j off the label: e / K
  float on = 1.0f;   // q_label: 1 - e + e / K
};

SDP_HOST_DEVICE XentTarget xent_target(float label_smoothing, int num_classes) {
  XentTarget q;
  q.off = label_smoothing / static_cast<float>(num_classes);
  q.on = 1.0f - label_smoothing + q.off;
  return q;
}

// Loss of `row` (k logits) for `label` in [0, k); writes the gradient (every term times
// inv_n, which is 1/N, times the loss scale under mixed precision) and the top-1 class.
// T: f32, or a 16-bit float on the GPU under mixed precision; the arithmetic is f32/f64.
template <class T>
SDP_HOST_DEVICE double softmax_xent_row(const T* row_in, int k, int32_t label, XentTarget q, float inv_n,
                                        float* grad, int* argmax_out) {
  const auto row = [row_in](int j) { return static_cast<float>(row_in[j]); };
  int argmax = 0;
  for (int j = 1; j < k; ++j)
    if (row(j) > row(argmax)) argmax = j;
  // Shift by the max so exp() cannot overflow.
  const float max = row(argmax);
  double sum = 0.0;
  for (int j = 0; j < k; ++j) {
    grad[j] = expf(row(j) - max);
    sum += grad[j];
  }
  // -sum_j q_j (z_j - max - log sum) with sum_j q_j = 1.
  double target_dot = static_cast<double>(row(label) - max);
  if (q.off > 0.0f) {
    double all = 0.0;
    for (int j = 0; j < k; ++j) all += static_cast<double>(row(j) - max);
    target_dot = double{q.on - q.off} * target_dot + double{q.off} * all;
  }
  const float scale = static_cast<float>(1.0 / sum) * inv_n;
  for (int j = 0; j < k; ++j) grad[j] = grad[j] * scale - q.off * inv_n;
  grad[label] -= (q.on - q.off) * inv_n;
  *argmax_out = argmax;
  return log(sum) - target_dot;
}

}  // namespace sdp::nn
