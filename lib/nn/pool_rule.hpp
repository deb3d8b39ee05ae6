// Max pooling's window arithmetic for the CUDA twin, written once as SDP_HOST_DEVICE
// functions (core/host_device.hpp) so that the CPU tests (tests/unit/nn/test_cuda_rules.cpp)
// run the very index math and tie/NaN rules the GPU kernels (pool2d_cuda.cu) run, against the
// CPU twin, on a machine without a GPU. The CPU twin itself stays on oneDNN and its direct
// loops. Plain NCHW, PyTorch's floor mode; padding never wins (PyTorch pads with -inf).
#pragma once

#include <cstdint>

#include "core/host_device.hpp"
#include "nn/elementwise_rule.hpp"

namespace sdp::nn {

struct MaxPoolGeometry {
  int64_t planes;  // N * C
  int64_t h, w, oh, ow;
  int64_t kernel, stride, padding;
};

// Output element `o` (plain [planes, oh, ow]): the window's maximum (ReLU'd when `relu`) and
// its position in the input plane (iy * w + ix). Windows are scanned row by row; a later
// element replaces the maximum only when strictly greater, so ties keep the first, and a
// NaN wins and stays (NaN propagates, as in PyTorch and oneDNN). T: the storage type (f32,
// or a 16-bit float on the GPU under mixed precision), compared in f32.
template <class T>
SDP_HOST_DEVICE float max_pool_window(const MaxPoolGeometry& g, const T* x, int64_t o, bool relu,
                                      int32_t* argmax) {
  const int64_t ox = o % g.ow;
  const int64_t oy = (o / g.ow) % g.oh;
  const int64_t plane = o / (g.ow * g.oh);
  const T* xp = x + plane * g.h * g.w;
  const int64_t y0 = oy * g.stride - g.padding, x0 = ox * g.stride - g.padding;
  float best = 0.0f;
  int64_t best_at = -1;
  for (int64_t a = 0; a < g.kernel; ++a) {
    const int64_t iy = y0 + a;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t b = 0; b < g.kernel; ++b) {
      const int64_t ix = x0 + b;
      if (ix < 0 || ix >= g.w) continue;
      const float v = static_cast<float>(xp[iy * g.w + ix]);
      const bool best_is_nan = best != best;
      if (best_at < 0 || (!best_is_nan && (v > best || v != v))) {
        best = v;
        best_at = iy * g.w + ix;
      }
    }
  }
  *argmax = static_cast<int32_t>(best_at);
  return relu ? relu_forward(best) : best;
}

// Input gradient of element `i` (plain [planes, h, w]): the sum of dy over the windows whose
// argmax it is (ReLU' from the output y first when `relu`), in window order: deterministic,
// no atomics, and every element written (0 where no window chose it).
template <class T>
SDP_HOST_DEVICE float max_pool_input_grad(const MaxPoolGeometry& g, const T* y, const T* dy,
                                          const int32_t* argmax, int64_t i, bool relu) {
  const int64_t ix = i % g.w;
  const int64_t iy = (i / g.w) % g.h;
  const int64_t plane = i / (g.w * g.h);
  // The windows oy with oy * s - p <= iy <= oy * s - p + k - 1 (likewise ox).
  const int64_t ylo = iy + g.padding - g.kernel + 1, xlo = ix + g.padding - g.kernel + 1;
  const int64_t oy_lo = ylo <= 0 ? 0 : (ylo + g.stride - 1) / g.stride;
  const int64_t ox_lo = xlo <= 0 ? 0 : (xlo + g.stride - 1) / g.stride;
  const int64_t oy_last = (iy + g.padding) / g.stride, ox_last = (ix + g.padding) / g.stride;
  const int64_t oy_hi = oy_last < g.oh - 1 ? oy_last : g.oh - 1;
  const int64_t ox_hi = ox_last < g.ow - 1 ? ox_last : g.ow - 1;
  const int32_t here = static_cast<int32_t>(iy * g.w + ix);
  float sum = 0.0f;
  for (int64_t oy = oy_lo; oy <= oy_hi; ++oy)
    for (int64_t ox = ox_lo; ox <= ox_hi; ++ox) {
      const int64_t o = (plane * g.oh + oy) * g.ow + ox;
      if (argmax[o] != here) continue;
      const float g_o = static_cast<float>(dy[o]);
      sum += relu ? relu_backward_from_output(static_cast<float>(y[o]), g_o) : g_o;
    }
  return sum;
}

}  // namespace sdp::nn
