// Hand-written max pooling for non-overlapping windows (kernel == stride, no padding), with
// the ReLU optionally fused, on f32 activations in NCHW, NHWC or oneDNN's channel-blocked
// layouts. oneDNN's pooling spent 1.4 ms of LeNet-5's 3.8 ms step on a 6-channel map that
// its blocked layout pads to 16 channels; these loops touch only the real channels, read
// and write any of the layouts directly (so the pooled map can go to the next convolution
// in NHWC without a reorder) and split the batch over the OpenMP threads oneDNN uses. The
// row loops are compiled per ISA (direct_max_pool_kernels.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/activation_layout.hpp"
#include "nn/direct_max_pool_kernels.hpp"

namespace sdp::nn {

struct DirectMaxPoolShape {
  int64_t batch, channels, out_h, out_w;
  int kernel;  // == stride; out = floor(in / kernel), the rest of the rows/columns unpooled
};

inline constexpr int kMaxDirectPoolKernel = 15;  // kernel^2 must stay below kClampedWindow

// The pooling of one layer for fixed shape and layouts, planned once (at configure time).
class DirectMaxPool {
 public:
  using ChannelRun = MaxPoolChannelRun;

  DirectMaxPool(const DirectMaxPoolShape& shape, const ActivationLayout& src,
                const ActivationLayout& dst);

  // dst = maxpool(src) (relu(maxpool(src)) with relu); argmax (may be null: inference) gets
  // one entry per output in (n, oh, ow, c) order. NaN propagates like PyTorch's max pool.
  // `isa` picks the loops' variant (tests compare them; the default is the process's).
  void forward(bool relu, const float* src, float* dst, uint8_t* argmax,
               CpuIsa isa = cpu_kernel_isa()) const;

  // Writes diff_dst to each window's maximum and 0 to the rest of the window. Positions
  // outside every window (unpooled rows/columns, padded channels) are never written: the
  // caller zeroes them once.
  void backward(const float* diff_dst, const uint8_t* argmax, float* diff_src,
                CpuIsa isa = cpu_kernel_isa()) const;

  // The vector width of the row loops: 16 or 8 lanes, 0 for the scalar loop (tests).
  int lanes() const;

 private:
  DirectMaxPoolShape shape_;
  ActivationLayout src_, dst_;
  std::vector<ChannelRun> runs_;
};

}  // namespace sdp::nn
