// The NCHW <-> NHWC index map of the GPU's convert_layout (context_cuda.cu), written once as
// an SDP_HOST_DEVICE function so the CPU tests check it against oneDNN's reorder.
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace sdp::nn {

// For element `i` of the destination (NHWC when to_nhwc, else NCHW) of an [n, c, h*w]
// tensor: the index of the source element it copies.
SDP_HOST_DEVICE int64_t channels_last_source(int64_t i, int64_t c, int64_t hw, bool to_nhwc) {
  if (to_nhwc) {  // i = (b * hw + p) * c + ch
    const int64_t ch = i % c, p = (i / c) % hw, b = i / (c * hw);
    return (b * c + ch) * hw + p;
  }
  const int64_t p = i % hw, ch = (i / hw) % c, b = i / (c * hw);  // i = (b * c + ch) * hw + p
  return (b * hw + p) * c + ch;
}

}  // namespace sdp::nn
