// The loops of nn/direct_conv_grad.hpp, compiled once per ISA (direct_conv_grad_isa.cpp,
// core/cpu_dispatch.hpp). Each output channel sums its own terms in the same order on every ISA
// (the lanes are channels, never partial sums): every variant gives the same bits.
#pragma once

#include <cstdint>

#include "core/cpu_dispatch.hpp"

namespace sdp::nn {

// The weight gradient of a convolution with one input channel, for one image.
struct ConvWeightGradJob {
  int64_t out_channels, in_h, in_w, out_h, out_w;
  int kernel, stride, padding;
  // The output gradient's layout: channels in blocks of `lanes` (8 or 16) at channel stride
  // c_stride, element (c, oh, ow) at (c / lanes) * c_stride + oh * h_stride + ow * w_stride
  // + c % lanes.
  int lanes;
  int64_t c_stride, h_stride, w_stride;
};

struct DirectConvGradKernels {
  // Adds one image's terms to dw ([channel block][kh][kw][lane]) and db ([channel block][lane]).
  // x_padded: the image with `padding` zeros on each side, (in_h + 2p) x (in_w + 2p); dy: the
  // image's output gradient.
  void (*add_image)(const ConvWeightGradJob& job, const float* x_padded, const float* dy,
                    float* dw, float* db);
};

SDP_ISA_KERNEL_TABLE(DirectConvGradKernels, direct_conv_grad_kernels)

}  // namespace sdp::nn
