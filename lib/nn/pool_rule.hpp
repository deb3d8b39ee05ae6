// Max pooling's window arithmetic for the CUDA twin, written once as SDP_HOST_DEVICE
// functions (core/host_device.hpp) so that the CPU tests (tests/unit/nn/test_cuda_rules.cpp)
// run the very index math and tie/NaN rules the GPU kernels (pool2d_cuda.cu) run, against the
// CPU twin, on a machine without a GPU. The CPU twin itself stays on oneDNN and its direct
// loops. Plain NCHW, or NHWC for a channels_last model; PyTorch's floor mode; padding never
// wins (PyTorch pads with -inf).
#pragma once

#include <cstdint>

#include "core/host_device.hpp"
#include "nn/elementwise_rule.hpp"

namespace sdp::nn {

struct MaxPoolGeometry {
  int64_t planes;  // N * C
  int64_t h, w, oh, ow;
  int64_t kernel, stride, padding;
  int64_t nhwc_channels = 0;  // > 0: x, y and their gradients are NHWC with this many channels
};

// The geometry in index type I: 32-bit on the GPU when every index fits (int64 division is
// several times slower there), 64-bit otherwise and on the CPU.
template <class I>
struct MaxPoolIndex {
  I h, w, oh, ow, kernel, stride, padding, c;
  SDP_HOST_DEVICE explicit MaxPoolIndex(const MaxPoolGeometry& g)
      : h(static_cast<I>(g.h)), w(static_cast<I>(g.w)), oh(static_cast<I>(g.oh)), ow(static_cast<I>(g.ow)),
        kernel(static_cast<I>(g.kernel)), stride(static_cast<I>(g.stride)), padding(static_cast<I>(g.padding)),
        c(static_cast<I>(g.nhwc_channels)) {}
};

// A window's argmax is its maximum's place in the window, a * kernel + b (row a, column b), in
// one byte: a quarter of the bytes of an index into the plane, which backward reads for every
// input element (kernel <= kMaxPoolKernelLimit). kNoMaximum: a window over padding alone.
constexpr int64_t kMaxPoolKernelLimit = 15;
constexpr uint8_t kNoMaximum = 0xFF;

// Whether window element v replaces the maximum so far (`best`, if `have`): only when strictly
// greater, so ties keep the first; a NaN wins and stays (NaN propagates, as in PyTorch and oneDNN).
SDP_HOST_DEVICE bool max_pool_replaces(bool have, float best, float v) {
  const bool best_is_nan = best != best;
  return !have || (!best_is_nan && (v > best || v != v));
}

// Calls visit(place, offset) for each element of the window whose top-left corner is (y0, x0)
// that lies inside the plane, row by row: place = a * kernel + b (row a, column b), offset =
// iy * w + ix its position in the plane.
template <class I, class Visit>
SDP_HOST_DEVICE void for_each_in_window(const MaxPoolIndex<I>& g, I y0, I x0, Visit visit) {
  for (I a = 0; a < g.kernel; ++a) {
    const I iy = y0 + a;
    if (iy < 0 || iy >= g.h) continue;
    for (I b = 0; b < g.kernel; ++b) {
      const I ix = x0 + b;
      if (ix < 0 || ix >= g.w) continue;
      visit(a * g.kernel + b, iy * g.w + ix);
    }
  }
}

// Output element `o` (plain [planes, oh, ow], or NHWC [n, oh, ow, c]): the window's maximum
// (ReLU'd when `relu`) and its place in the window. Windows are scanned row by row; a later
// element replaces the maximum only when strictly greater, so ties keep the first, and a NaN
// wins and stays (NaN propagates, as in PyTorch and oneDNN). T: the storage type (f32, or a
// 16-bit float on the GPU under mixed precision), compared in f32.
template <class T, class I = int64_t>
SDP_HOST_DEVICE float max_pool_window(const MaxPoolGeometry& geometry, const T* x, I o, bool relu,
                                      uint8_t* argmax) {
  const MaxPoolIndex<I> g(geometry);
  const I pos = g.c > 0 ? o / g.c : o;  // output element o's position in its plane, and plane
  const I ox = pos % g.ow;
  const I oy = (pos / g.ow) % g.oh;
  const I image = pos / (g.ow * g.oh);
  const I step = g.c > 0 ? g.c : 1;
  const T* xp = g.c > 0 ? x + image * g.h * g.w * g.c + o % g.c : x + image * g.h * g.w;
  const I y0 = oy * g.stride - g.padding, x0 = ox * g.stride - g.padding;
  float best = 0.0f;
  I best_at = -1;
  for_each_in_window(g, y0, x0, [&](I place, I offset) {
    const float v = static_cast<float>(xp[offset * step]);
    if (max_pool_replaces(best_at >= 0, best, v)) {
      best = v;
      best_at = place;
    }
  });
  *argmax = best_at < 0 ? kNoMaximum : static_cast<uint8_t>(best_at);
  return relu ? relu_forward(best) : best;
}

// The windows whose output gradients an input element may collect: input element `i`'s
// position (plain [planes, h, w], or NHWC [n, h, w, c]) and the output windows oy_lo..oy_hi,
// ox_lo..ox_hi that contain it, those with oy * s - p <= iy <= oy * s - p + k - 1 (likewise ox).
template <class I>
struct MaxPoolInputWindows {
  I iy, ix, image, oy_lo, oy_hi, ox_lo, ox_hi;
};

template <class I>
SDP_HOST_DEVICE MaxPoolInputWindows<I> max_pool_input_windows(const MaxPoolIndex<I>& g, I i) {
  MaxPoolInputWindows<I> r;
  const I pos = g.c > 0 ? i / g.c : i;  // input element i's position in its plane, and plane
  r.ix = pos % g.w;
  r.iy = (pos / g.w) % g.h;
  r.image = pos / (g.w * g.h);
  const I ylo = r.iy + g.padding - g.kernel + 1, xlo = r.ix + g.padding - g.kernel + 1;
  r.oy_lo = ylo <= 0 ? 0 : (ylo + g.stride - 1) / g.stride;
  r.ox_lo = xlo <= 0 ? 0 : (xlo + g.stride - 1) / g.stride;
  const I oy_last = (r.iy + g.padding) / g.stride, ox_last = (r.ix + g.padding) / g.stride;
  r.oy_hi = oy_last < g.oh - 1 ? oy_last : g.oh - 1;
  r.ox_hi = ox_last < g.ow - 1 ? ox_last : g.ow - 1;
  return r;
}

// Input gradient of element `i` (plain [planes, h, w], or NHWC [n, h, w, c]): the sum of dy
// over the windows whose argmax it is (ReLU' from the output y first when `relu`), in window
// order: deterministic, no atomics, and every element written (0 where no window chose it).
template <class T, class I = int64_t>
SDP_HOST_DEVICE float max_pool_input_grad(const MaxPoolGeometry& geometry, const T* y, const T* dy,
                                          const uint8_t* argmax, I i, bool relu) {
  const MaxPoolIndex<I> g(geometry);
  const MaxPoolInputWindows<I> w = max_pool_input_windows(g, i);
  float sum = 0.0f;
  for (I oy = w.oy_lo; oy <= w.oy_hi; ++oy)
    for (I ox = w.ox_lo; ox <= w.ox_hi; ++ox) {
      const I o =
          g.c > 0 ? ((w.image * g.oh + oy) * g.ow + ox) * g.c + i % g.c : (w.image * g.oh + oy) * g.ow + ox;
      // This element's place in window (oy, ox).
      const I here = (w.iy - (oy * g.stride - g.padding)) * g.kernel + (w.ix - (ox * g.stride - g.padding));
      if (static_cast<I>(argmax[o]) != here) continue;
      const float g_o = static_cast<float>(dy[o]);
      sum += relu ? relu_backward_from_output(static_cast<float>(y[o]), g_o) : g_o;
    }
  return sum;
}

// The NHWC rules above for V consecutive channels of one position at once (C a multiple of V,
// `o` / `i` the first of them, a multiple of V): the GPU's NHWC kernels load and store V
// 16-bit (or f32) values as one 16-byte access and do the window arithmetic, most of a scalar
// thread's work, once for V elements. Element by element the same comparisons in the same
// order, so the results equal the scalar rules' bit for bit (the CPU tests check it).
// Load: load(const T* p, float* v) reads p[0 .. V); load_bytes(const uint8_t* p, uint8_t* b)
// reads p[0 .. V).
template <int V, class T, class I, class Load>
SDP_HOST_DEVICE void max_pool_window_nhwc(const MaxPoolGeometry& geometry, const T* x, I o, bool relu, Load load,
                                          float* out, uint8_t* argmax) {
  const MaxPoolIndex<I> g(geometry);
  const I pos = o / g.c;
  const I ox = pos % g.ow;
  const I oy = (pos / g.ow) % g.oh;
  const I image = pos / (g.ow * g.oh);
  const T* xp = x + image * g.h * g.w * g.c + o % g.c;
  const I y0 = oy * g.stride - g.padding, x0 = ox * g.stride - g.padding;
  float best[V];
  int best_at[V];
  for (int k = 0; k < V; ++k) {
    best[k] = 0.0f;
    best_at[k] = -1;
  }
  for_each_in_window(g, y0, x0, [&](I place, I offset) {
    float v[V];
    load(xp + offset * g.c, v);
    for (int k = 0; k < V; ++k)
      if (max_pool_replaces(best_at[k] >= 0, best[k], v[k])) {
        best[k] = v[k];
        best_at[k] = static_cast<int>(place);
      }
  });
  for (int k = 0; k < V; ++k) {
    argmax[k] = best_at[k] < 0 ? kNoMaximum : static_cast<uint8_t>(best_at[k]);
    out[k] = relu ? relu_forward(best[k]) : best[k];
  }
}

template <int V, class T, class I, class Load, class LoadBytes>
SDP_HOST_DEVICE void max_pool_input_grad_nhwc(const MaxPoolGeometry& geometry, const T* y, const T* dy,
                                              const uint8_t* argmax, I i, bool relu, Load load, LoadBytes load_bytes,
                                              float* sum) {
  const MaxPoolIndex<I> g(geometry);
  const MaxPoolInputWindows<I> w = max_pool_input_windows(g, i);
  for (int k = 0; k < V; ++k) sum[k] = 0.0f;
  for (I oy = w.oy_lo; oy <= w.oy_hi; ++oy)
    for (I ox = w.ox_lo; ox <= w.ox_hi; ++ox) {
      const I o = ((w.image * g.oh + oy) * g.ow + ox) * g.c + i % g.c;
      const int here =
          static_cast<int>((w.iy - (oy * g.stride - g.padding)) * g.kernel + (w.ix - (ox * g.stride - g.padding)));
      uint8_t at[V];
      load_bytes(argmax + o, at);
      bool any = false;
      for (int k = 0; k < V; ++k) any = any || at[k] == here;
      if (!any) continue;
      float g_o[V], y_o[V];
      load(dy + o, g_o);
      if (relu) load(y + o, y_o);
      for (int k = 0; k < V; ++k)
        if (at[k] == here) sum[k] += relu ? relu_backward_from_output(y_o[k], g_o[k]) : g_o[k];
    }
}

}  // namespace sdp::nn
