// Dropout's per-element math, written once for both devices (core/host_device.hpp): the
// mask value of one raw draw of the layer's std::mt19937_64 (Dropout::draw_mask, on the host
// for both devices, so both get the same mask bit for bit) and the masked product the CPU
// loop and the CUDA kernel apply in forward and backward.
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace sdp::nn {

// Draws are compared as 53-bit integers against p * 2^53: cheaper than a distribution object.
SDP_HOST_DEVICE uint64_t dropout_threshold(float p) {
  return static_cast<uint64_t>(static_cast<double>(p) * 9007199254740992.0);
}

// 0 (dropped) or the inverted scale 1 / (1 - p) for one 64-bit draw.
SDP_HOST_DEVICE float dropout_mask_value(uint64_t draw, uint64_t threshold, float scale) {
  return (draw >> 11) < threshold ? 0.0f : scale;
}

// y = x * m forward, dx = dy * m backward.
SDP_HOST_DEVICE float dropout_apply(float x, float mask) { return x * mask; }

}  // namespace sdp::nn
