// The row loops of nn/direct_max_pool.hpp, compiled once per ISA (direct_max_pool_isa.cpp,
// core/cpu_dispatch.hpp). Each variant gives the same bits: the loops only compare and copy.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cpu_dispatch.hpp"

namespace sdp::nn {

// Channels per run: at most this many lanes a vector loop handles at once.
inline constexpr int64_t kMaxPoolLanes = 16;

// Window index (a * kernel + b) of each output's maximum, or kClampedWindow when the fused
// ReLU clamped that output to 0 (its gradient is then 0 everywhere in the window).
inline constexpr uint8_t kClampedWindow = 255;

// Up to kMaxPoolLanes channels that sit at equal steps in both the source and the destination
// (one block of a blocked layout, a stretch of NHWC, or NCHW planes).
struct MaxPoolChannelRun {
  int64_t first, length, src_offset, dst_offset;
};

// What one output row (fixed n, oh) needs.
struct MaxPoolRowJob {
  const std::vector<MaxPoolChannelRun>* runs;
  int64_t out_w, kernel;
  int64_t src_h, src_w, src_step;  // strides of the source: row, column, channel
  int64_t dst_w, dst_step;         // strides of the destination: column, channel
  // 8 or 16 when kernel is 2, channel steps are 1 and `lanes` lanes of every run may be read
  // and written (a block of that many channels, whose padded lanes hold zeros, or runs of that
  // length): the vector loops. 0: one channel at a time, any kernel and layout.
  int lanes;
  // The destination's runs may be read `lanes` wide too (a block of that many channels).
  bool dst_padded;
};

struct DirectMaxPoolKernels {
  // One row of outputs (dst, argmax in (ow, c) order; argmax may be null: inference).
  void (*forward_row)(const MaxPoolRowJob& job, bool relu, const float* src, float* dst,
                      uint8_t* argmax, int64_t channels);
  // diff_dst to each window's maximum, 0 to the rest of the window.
  void (*backward_row)(const MaxPoolRowJob& job, const float* diff_dst, const uint8_t* argmax,
                       float* diff_src, int64_t channels);
};

SDP_ISA_KERNEL_TABLE(DirectMaxPoolKernels, direct_max_pool_kernels)

}  // namespace sdp::nn
