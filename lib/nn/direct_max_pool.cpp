#include "nn/direct_max_pool.hpp"

#include <algorithm>
#include <vector>

namespace sdp::nn {

std::optional<ActivationLayout> activation_layout(const memory::desc& md) {
  using tag = memory::format_tag;
  const Dims dims = md.dims();
  if (dims.size() != 4 || md.data_type() != memory::data_type::f32) return std::nullopt;
  // Only dense layouts oneDNN itself would create for these dims (no views, no offsets).
  for (tag t : {tag::abcd, tag::acdb, tag::aBcd16b, tag::aBcd8b, tag::aBcd4b}) {
    if (!(md == memory::desc(dims, memory::data_type::f32, t))) continue;
    const auto& blocking = md.data.format_desc.blocking;
    ActivationLayout layout;
    layout.n_stride = blocking.strides[0];
    layout.c_stride = blocking.strides[1];
    layout.h_stride = blocking.strides[2];
    layout.w_stride = blocking.strides[3];
    layout.block = blocking.inner_nblks == 1 ? blocking.inner_blks[0] : 1;
    layout.tag = t;
    return layout;
  }
  return std::nullopt;
}

namespace {

// Channels per run: the lane loops' length.
constexpr int64_t kLanes = 16;
using ChannelRun = DirectMaxPool::ChannelRun;

int64_t channel_offset(const ActivationLayout& l, int64_t c) {
  return (c / l.block) * l.c_stride + c % l.block;
}
// Distance between neighbouring channels inside a block (blocked) or overall (plain).
int64_t channel_step(const ActivationLayout& l) {
  return l.block > 1 ? 1 : l.c_stride;
}

std::vector<ChannelRun> channel_runs(int64_t channels, const ActivationLayout& src,
                                     const ActivationLayout& dst) {
  std::vector<ChannelRun> runs;
  for (int64_t c = 0; c < channels;) {
    int64_t end = std::min(channels, c + kLanes);
    // A block boundary on either side ends the run.
    if (src.block > 1) end = std::min(end, (c / src.block + 1) * src.block);
    if (dst.block > 1) end = std::min(end, (c / dst.block + 1) * dst.block);
    runs.push_back({c, end - c, channel_offset(src, c), channel_offset(dst, c)});
    c = end;
  }
  return runs;
}

// What one output row (fixed n, oh) needs. The loops are branch-free: with real data the
// comparisons are coin flips, and mispredicted branches made an earlier version 3x slower.
struct RowJob {
  const std::vector<ChannelRun>* runs;
  int64_t out_w, kernel;
  int64_t src_h, src_w, src_step;  // strides of the source: row, column, channel
  int64_t dst_w, dst_step;         // strides of the destination: column, channel
  // All kLanes lanes of every run may be read and written (a 16-channel block, whose padded
  // lanes hold zeros, or a full run), unit channel steps, kernel 2: the vectorized path.
  bool vectorized;
};

// Whether v replaces the window's maximum so far: the first maximum wins, and a NaN wins over
// numbers (PyTorch propagates it).
inline bool takes_over(float v, float best) {
  return v > best || (v != v && best == best);
}

// One row of outputs, compiled for AVX-512, AVX2 and baseline x86-64 (picked at load time):
// the build targets any x86-64, the lane loops want the widest vectors the machine has.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SDP_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SDP_VECTOR_CLONES
#endif

// kernel 2 with all kLanes lanes readable (LeNet's case): straight-line lane loops that the
// compiler turns into a few vector instructions per pixel.
template <bool kRelu>
SDP_VECTOR_CLONES void forward_row_k2(const RowJob& job, const float* src, float* dst,
                                      uint8_t* argmax, int64_t channels) {
  const int64_t hs = job.src_h, ws = job.src_w;
  for (int64_t ow = 0; ow < job.out_w; ++ow) {
    for (const ChannelRun& r : *job.runs) {
      const float* x = src + 2 * ow * ws + r.src_offset;
      float best[kLanes];
      int32_t best_at[kLanes];
      for (int64_t i = 0; i < kLanes; ++i) {
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
      for (int64_t i = 0; i < r.length; ++i) y[i] = best[i];
      if (am)
        for (int64_t i = 0; i < r.length; ++i) am[i] = static_cast<uint8_t>(best_at[i]);
    }
  }
}

SDP_VECTOR_CLONES
void backward_row_k2(const RowJob& job, const float* diff_dst, const uint8_t* argmax,
                     float* diff_src, int64_t channels) {
  const int64_t hs = job.src_h, ws = job.src_w;
  for (int64_t ow = 0; ow < job.out_w; ++ow) {
    for (const ChannelRun& r : *job.runs) {
      // Lanes past the run (a block's padded channels) get gradient 0.
      float g[kLanes] = {};
      int32_t at[kLanes];
      for (int64_t i = 0; i < kLanes; ++i) at[i] = kClampedWindow;
      const float* dy = diff_dst + ow * job.dst_w + r.dst_offset;
      const uint8_t* am = argmax + ow * channels + r.first;
      for (int64_t i = 0; i < r.length; ++i) {
        g[i] = dy[i];
        at[i] = am[i];
      }
      float* dx = diff_src + 2 * ow * ws + r.src_offset;
      for (int64_t i = 0; i < kLanes; ++i) {
        dx[i] = at[i] == 0 ? g[i] : 0.f;
        dx[ws + i] = at[i] == 1 ? g[i] : 0.f;
        dx[hs + i] = at[i] == 2 ? g[i] : 0.f;
        dx[hs + ws + i] = at[i] == 3 ? g[i] : 0.f;
      }
    }
  }
}

// Any kernel size and layout, one channel at a time.
void forward_row(const RowJob& job, bool relu, const float* src, float* dst, uint8_t* argmax,
                 int64_t channels) {
  const int64_t k = job.kernel;
  for (int64_t ow = 0; ow < job.out_w; ++ow)
    for (const ChannelRun& r : *job.runs)
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

void backward_row(const RowJob& job, const float* diff_dst, const uint8_t* argmax, float* diff_src,
                  int64_t channels) {
  const int64_t k = job.kernel;
  for (int64_t ow = 0; ow < job.out_w; ++ow)
    for (const ChannelRun& r : *job.runs)
      for (int64_t i = 0; i < r.length; ++i) {
        const int32_t at = argmax[ow * channels + r.first + i];
        const float g = diff_dst[ow * job.dst_w + r.dst_offset + i * job.dst_step];
        float* dx = diff_src + ow * k * job.src_w + r.src_offset + i * job.src_step;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b)
            dx[a * job.src_h + b * job.src_w] = at == a * k + b ? g : 0.f;
      }
}

RowJob row_job(const DirectMaxPoolShape& s, const ActivationLayout& src,
               const ActivationLayout& dst, const std::vector<ChannelRun>& runs) {
  RowJob job{&runs,        s.out_w,           s.kernel,
             src.h_stride, src.w_stride,      channel_step(src),
             dst.w_stride, channel_step(dst), false};
  job.vectorized = s.kernel == 2 && job.src_step == 1 && job.dst_step == 1;
  for (const ChannelRun& r : runs)
    if (r.length != kLanes && src.block != kLanes) job.vectorized = false;
  return job;
}

}  // namespace

DirectMaxPool::DirectMaxPool(const DirectMaxPoolShape& shape, const ActivationLayout& src,
                             const ActivationLayout& dst)
    : shape_(shape), src_(src), dst_(dst), runs_(channel_runs(shape.channels, src, dst)) {}

void DirectMaxPool::forward(bool relu, const float* src, float* dst, uint8_t* argmax) const {
  const DirectMaxPoolShape& s = shape_;
  const RowJob job = row_job(s, src_, dst_, runs_);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      const float* x = src + n * src_.n_stride + oh * s.kernel * src_.h_stride;
      float* y = dst + n * dst_.n_stride + oh * dst_.h_stride;
      uint8_t* am = argmax ? argmax + (n * s.out_h + oh) * s.out_w * s.channels : nullptr;
      if (job.vectorized && relu)
        forward_row_k2<true>(job, x, y, am, s.channels);
      else if (job.vectorized)
        forward_row_k2<false>(job, x, y, am, s.channels);
      else
        forward_row(job, relu, x, y, am, s.channels);
    }
}

void DirectMaxPool::backward(const float* diff_dst, const uint8_t* argmax, float* diff_src) const {
  const DirectMaxPoolShape& s = shape_;
  const RowJob job = row_job(s, src_, dst_, runs_);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      const float* dy = diff_dst + n * dst_.n_stride + oh * dst_.h_stride;
      const uint8_t* am = argmax + (n * s.out_h + oh) * s.out_w * s.channels;
      float* dx = diff_src + n * src_.n_stride + oh * s.kernel * src_.h_stride;
      if (job.vectorized)
        backward_row_k2(job, dy, am, dx, s.channels);
      else
        backward_row(job, dy, am, dx, s.channels);
    }
}

}  // namespace sdp::nn
