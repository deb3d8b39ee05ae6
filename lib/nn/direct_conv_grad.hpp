// The weight and bias gradients of a convolution with one input channel (the first layer of a
// network on grayscale images: LeNet-5's conv1), computed directly from the plain input and
// the output gradient in oneDNN's channel-blocked layout.
//
// Why: oneDNN's backward-weights kernels pad the input's one channel to a block of 8 (AVX2) or
// 16 (AVX-512) and reorder it so, then do 8 or 16 times the work: LeNet-5's conv1 backward took
// 3.0 ms of a 10.2 ms step at batch 64 on an AVX2 machine. Here the output channels of a block
// are the vector lanes and the one input channel is broadcast.
//
// Deterministic: the batch is split over the threads in fixed parts and their sums are added
// in thread order, so a given thread count gives the same bits every step (and on every ISA).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/activation_layout.hpp"
#include "nn/direct_conv_grad_kernels.hpp"

namespace sdp::nn {

struct DirectConvGradShape {
  int64_t batch, out_channels, in_h, in_w, out_h, out_w;
  int kernel, stride, padding;
};

class DirectConvWeightGrad {
 public:
  // Whether the loops here handle this convolution: one input channel, a kernel up to 11, the
  // output gradient in a layout blocked by 8 or 16 channels.
  static bool supports(const DirectConvGradShape& shape, const ActivationLayout& diff_dst);

  DirectConvWeightGrad(const DirectConvGradShape& shape, const ActivationLayout& diff_dst);

  // dw (out_channels x 1 x kernel x kernel, PyTorch's layout) and db (out_channels; may be
  // null) from src (batch x 1 x in_h x in_w, plain) and diff_dst; both overwritten. `isa`
  // picks the loops' variant (tests compare them; the default is the process's).
  void compute(const float* src, const float* diff_dst, float* dw, float* db,
               CpuIsa isa = cpu_kernel_isa());

 private:
  DirectConvGradShape shape_;
  ActivationLayout diff_dst_;
  ConvWeightGradJob job_;
  int64_t blocks_;  // channel blocks of job_.lanes
  // Per thread: its sums (dw then db, in the kernels' order) and one padded image.
  std::vector<float> scratch_;
};

}  // namespace sdp::nn
