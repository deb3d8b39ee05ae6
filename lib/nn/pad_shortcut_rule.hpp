// PadShortcut's index math (option A of He et al. 2016) per element, for the CUDA kernels
// (pad_shortcut_cuda.cu: one thread per element of the plain NCHW or NHWC output, forward, or input
// gradient, backward, mapped to the one element it copies, or to none). The CPU keeps its
// row loops (pad_shortcut_cpu.cpp), which need no division per element; test_cuda_rules
// checks these functions against that CPU layer.
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace sdp::nn {

struct PadShortcutGeometry {
  int64_t n, c, h, w;  // input
  int64_t oc, oh, ow;  // output: oc = c + 2 pad, oh = ceil(h / stride), ow = ceil(w / stride)
  int64_t stride, pad;
  bool nhwc = false;  // input, output and gradients channels-last (a channels_last model)
};

// Index into the input of output element `out` (plain NCHW), or -1 for a padded channel.
SDP_HOST_DEVICE int64_t pad_shortcut_source(const PadShortcutGeometry& g, int64_t out) {
  if (g.nhwc) {  // out = ((i * oh + r) * ow + q) * oc + k
    const int64_t k = out % g.oc;
    const int64_t q = (out / g.oc) % g.ow;
    const int64_t r = (out / (g.oc * g.ow)) % g.oh;
    const int64_t i = out / (g.oc * g.ow * g.oh);
    const int64_t src_c = k - g.pad;
    if (src_c < 0 || src_c >= g.c) return -1;
    return ((i * g.h + r * g.stride) * g.w + q * g.stride) * g.c + src_c;
  }
  const int64_t q = out % g.ow;
  const int64_t r = (out / g.ow) % g.oh;
  const int64_t k = (out / (g.ow * g.oh)) % g.oc;
  const int64_t i = out / (g.ow * g.oh * g.oc);
  const int64_t src_c = k - g.pad;
  if (src_c < 0 || src_c >= g.c) return -1;
  return ((i * g.c + src_c) * g.h + r * g.stride) * g.w + q * g.stride;
}

// Index into the output gradient that input element `in` received, or -1 when the
// subsampling skipped it (its gradient is 0).
SDP_HOST_DEVICE int64_t pad_shortcut_grad_source(const PadShortcutGeometry& g, int64_t in) {
  if (g.nhwc) {  // in = ((i * h + y) * w + x) * c + k
    const int64_t k = in % g.c;
    const int64_t x = (in / g.c) % g.w;
    const int64_t y = (in / (g.c * g.w)) % g.h;
    const int64_t i = in / (g.c * g.w * g.h);
    if (y % g.stride != 0 || x % g.stride != 0) return -1;
    return ((i * g.oh + y / g.stride) * g.ow + x / g.stride) * g.oc + k + g.pad;
  }
  const int64_t x = in % g.w;
  const int64_t y = (in / g.w) % g.h;
  const int64_t k = (in / (g.w * g.h)) % g.c;
  const int64_t i = in / (g.w * g.h * g.c);
  if (y % g.stride != 0 || x % g.stride != 0) return -1;
  return ((i * g.oc + k + g.pad) * g.oh + y / g.stride) * g.ow + x / g.stride;
}

}  // namespace sdp::nn
