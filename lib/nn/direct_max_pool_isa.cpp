// The max pool's row loops, compiled once per ISA (core/cpu_dispatch.hpp). They are branch-free:
// with real data the comparisons are coin flips, and mispredicted branches made an earlier
// version 3x slower.
#include <cstring>

#include "core/simd_lanes.hpp"
#include "nn/direct_max_pool_kernels.hpp"

namespace sdp::nn::SDP_ISA_NAMESPACE {

namespace {

// Whether v replaces the window's maximum so far: the first maximum wins, and a NaN wins over
// numbers (PyTorch propagates it).
inline bool takes_over(float v, float best) {
  return v > best || (v != v && best == best);
}

// Kernel 2 with all kLanes lanes readable (LeNet's case: 8 lanes on an AVX2 machine, whose
// oneDNN layouts block channels by 8, 16 with AVX-512): straight-line lane loops that the
// compiler turns into a few vector instructions per pixel.
template <int kLanes, bool kRelu>
void forward_row_k2(const MaxPoolRowJob& job, const float* src, float* dst, uint8_t* argmax,
                    int64_t channels) {
  const int64_t hs = job.src_h, ws = job.src_w;
  for (int64_t ow = 0; ow < job.out_w; ++ow) {
    for (const MaxPoolChannelRun& r : *job.runs) {
      const float* x = src + 2 * ow * ws + r.src_offset;
      float best[kLanes];
      int32_t best_at[kLanes];
      for (int i = 0; i < kLanes; ++i) {
        const float v0 = x[i], v1 = x[ws + i], v2 = x[hs + i], v3 = x[hs + ws + i];
        float m = v0;
        int32_t at = 0;
        bool take = takes_over(v1, m);
        m = take ? v1 : m;
        at = take ? 1 : at;
        take = takes_over(v2, m);
        m = take ? v2 : m;
        at = take ? 2 : at;
        take = takes_over(v3, m);
        m = take ? v3 : m;
        at = take ? 3 : at;
        if (kRelu) {
          const bool clamped = m <= 0.f;
          m = clamped ? 0.f : m;
          at = clamped ? kClampedWindow : at;
        }
        best[i] = m;
        best_at[i] = at;
      }
      float* y = dst + ow * job.dst_w + r.dst_offset;
      uint8_t* am = argmax ? argmax + ow * channels + r.first : nullptr;
      if (r.length == kLanes) {
        for (int i = 0; i < kLanes; ++i) y[i] = best[i];
        if (am)
          for (int i = 0; i < kLanes; ++i) am[i] = static_cast<uint8_t>(best_at[i]);
      } else {
        for (int64_t i = 0; i < r.length; ++i) y[i] = best[i];
        if (am)
          for (int64_t i = 0; i < r.length; ++i) am[i] = static_cast<uint8_t>(best_at[i]);
      }
    }
  }
}

template <int kLanes>
void backward_row_k2(const MaxPoolRowJob& job, const float* diff_dst, const uint8_t* argmax,
                     float* diff_src, int64_t channels) {
  using F = typename simd::Lanes<kLanes>::F32;
  using I = typename simd::Lanes<kLanes>::I32;
  using U8 = typename simd::Lanes<kLanes>::U8;
  const int64_t hs = job.src_h, ws = job.src_w;
  for (int64_t ow = 0; ow < job.out_w; ++ow) {
    for (const MaxPoolChannelRun& r : *job.runs) {
      const float* dy = diff_dst + ow * job.dst_w + r.dst_offset;
      const uint8_t* am = argmax + ow * channels + r.first;
      // Lanes past the run (a block's padded channels) take no maximum (kClampedWindow), so
      // every position gets 0 there whatever their gradient reads.
      U8 window = U8{} + kClampedWindow;
      F g;
      if (r.length == kLanes) {
        window = simd::load<U8>(am);
        g = simd::load<F>(dy);
      } else {
        std::memcpy(&window, am, static_cast<std::size_t>(r.length));
        if (job.dst_padded) {
          g = simd::load<F>(dy);
        } else {
          float part[kLanes] = {};
          std::memcpy(part, dy, static_cast<std::size_t>(r.length) * sizeof(float));
          g = simd::load<F>(part);
        }
      }
      const I at = __builtin_convertvector(window, I);
      float* dx = diff_src + 2 * ow * ws + r.src_offset;
      simd::store(dx, simd::keep_where(at == 0, g));
      simd::store(dx + ws, simd::keep_where(at == 1, g));
      simd::store(dx + hs, simd::keep_where(at == 2, g));
      simd::store(dx + hs + ws, simd::keep_where(at == 3, g));
    }
  }
}

// Any kernel size and layout, one channel at a time.
void forward_row_any(const MaxPoolRowJob& job, bool relu, const float* src, float* dst,
                     uint8_t* argmax, int64_t channels) {
  const int64_t k = job.kernel;
  for (int64_t ow = 0; ow < job.out_w; ++ow)
    for (const MaxPoolChannelRun& r : *job.runs)
      for (int64_t i = 0; i < r.length; ++i) {
        const float* x = src + ow * k * job.src_w + r.src_offset + i * job.src_step;
        float m = x[0];
        int32_t at = 0;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b) {
            const float v = x[a * job.src_h + b * job.src_w];
            const bool take = takes_over(v, m);
            m = take ? v : m;
            at = take ? static_cast<int32_t>(a * k + b) : at;
          }
        const bool clamped = relu && m <= 0.f;
        dst[ow * job.dst_w + r.dst_offset + i * job.dst_step] = clamped ? 0.f : m;
        if (argmax)
          argmax[ow * channels + r.first + i] = clamped ? kClampedWindow : static_cast<uint8_t>(at);
      }
}

void backward_row_any(const MaxPoolRowJob& job, const float* diff_dst, const uint8_t* argmax,
                      float* diff_src, int64_t channels) {
  const int64_t k = job.kernel;
  for (int64_t ow = 0; ow < job.out_w; ++ow)
    for (const MaxPoolChannelRun& r : *job.runs)
      for (int64_t i = 0; i < r.length; ++i) {
        const int32_t at = argmax[ow * channels + r.first + i];
        const float g = diff_dst[ow * job.dst_w + r.dst_offset + i * job.dst_step];
        float* dx = diff_src + ow * k * job.src_w + r.src_offset + i * job.src_step;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b) dx[a * job.src_h + b * job.src_w] = at == a * k + b ? g : 0.f;
      }
}

void forward_row(const MaxPoolRowJob& job, bool relu, const float* src, float* dst, uint8_t* argmax,
                 int64_t channels) {
  switch (job.lanes * 2 + (relu ? 1 : 0)) {
    case 16 * 2 + 1:
      return forward_row_k2<16, true>(job, src, dst, argmax, channels);
    case 16 * 2:
      return forward_row_k2<16, false>(job, src, dst, argmax, channels);
    case 8 * 2 + 1:
      return forward_row_k2<8, true>(job, src, dst, argmax, channels);
    case 8 * 2:
      return forward_row_k2<8, false>(job, src, dst, argmax, channels);
    default:
      return forward_row_any(job, relu, src, dst, argmax, channels);
  }
}

void backward_row(const MaxPoolRowJob& job, const float* diff_dst, const uint8_t* argmax,
                  float* diff_src, int64_t channels) {
  switch (job.lanes) {
    case 16:
      return backward_row_k2<16>(job, diff_dst, argmax, diff_src, channels);
    case 8:
      return backward_row_k2<8>(job, diff_dst, argmax, diff_src, channels);
    default:
      return backward_row_any(job, diff_dst, argmax, diff_src, channels);
  }
}

}  // namespace

extern const DirectMaxPoolKernels direct_max_pool_kernels = {forward_row, backward_row};

}  // namespace sdp::nn::SDP_ISA_NAMESPACE
