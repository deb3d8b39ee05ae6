// Hand-written max pooling for non-overlapping windows (kernel == stride, no padding), with
// the ReLU optionally fused, on f32 activations in NCHW, NHWC or oneDNN's channel-blocked
// layouts. oneDNN's pooling spent 1.4 ms of LeNet-5's 3.8 ms step on a 6-channel map that
// its blocked layout pads to 16 channels; these loops touch only the real channels, read
// and write any of the layouts directly (so the pooled map can go to the next convolution
// in NHWC without a reorder) and split the batch over the OpenMP threads oneDNN uses.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "nn/onednn.hpp"

namespace sdp::nn {

// Where element (n, c, h, w) of a 4-D f32 tensor lives, in floats:
//   n * n_stride + (c / block) * c_stride + h * h_stride + w * w_stride + c % block.
struct ActivationLayout {
  int64_t n_stride = 0, c_stride = 0, h_stride = 0, w_stride = 0;
  int64_t block = 1;  // channels per inner block (1 for plain layouts)
  memory::format_tag tag = memory::format_tag::undef;  // the oneDNN name of the layout
};

// The layout of `md` when it is a dense f32 NCHW, NHWC or nChw{4,8,16}c tensor.
std::optional<ActivationLayout> activation_layout(const memory::desc& md);

struct DirectMaxPoolShape {
  int64_t batch, channels, out_h, out_w;
  int kernel;  // == stride; out = floor(in / kernel), the rest of the rows/columns unpooled
};

// Window index (a * kernel + b) of each output's maximum, or kClampedWindow when the fused
// ReLU clamped that output to 0 (its gradient is then 0 everywhere in the window).
inline constexpr uint8_t kClampedWindow = 255;
inline constexpr int kMaxDirectPoolKernel = 15;  // kernel^2 must stay below kClampedWindow

// The pooling of one layer for fixed shape and layouts, planned once (at configure time).
class DirectMaxPool {
 public:
  // Up to 16 channels that sit at equal steps in both the source and the destination (one
  // block of a blocked layout, a stretch of NHWC, or NCHW planes).
  struct ChannelRun {
    int64_t first, length, src_offset, dst_offset;
  };

  DirectMaxPool(const DirectMaxPoolShape& shape, const ActivationLayout& src,
                const ActivationLayout& dst);

  // dst = maxpool(src) (relu(maxpool(src)) with relu); argmax (may be null: inference) gets
  // one entry per output in (n, oh, ow, c) order. NaN propagates like PyTorch's max pool.
  void forward(bool relu, const float* src, float* dst, uint8_t* argmax) const;

  // Writes diff_dst to each window's maximum and 0 to the rest of the window. Positions
  // outside every window (unpooled rows/columns, padded channels) are never written: the
  // caller zeroes them once.
  void backward(const float* diff_dst, const uint8_t* argmax, float* diff_src) const;

 private:
  DirectMaxPoolShape shape_;
  ActivationLayout src_, dst_;
  std::vector<ChannelRun> runs_;
};

}  // namespace sdp::nn
