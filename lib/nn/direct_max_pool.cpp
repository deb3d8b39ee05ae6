#include "nn/direct_max_pool.hpp"

#include <algorithm>
#include <vector>

namespace sdp::nn {

namespace {

using ChannelRun = DirectMaxPool::ChannelRun;
constexpr int64_t kLanes = kMaxPoolLanes;

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

MaxPoolRowJob row_job(const DirectMaxPoolShape& s, const ActivationLayout& src,
                      const ActivationLayout& dst, const std::vector<ChannelRun>& runs) {
  MaxPoolRowJob job{&runs,        s.out_w,           s.kernel,
                    src.h_stride, src.w_stride,      channel_step(src),
                    dst.w_stride, channel_step(dst), 0,            false};
  if (s.kernel != 2 || job.src_step != 1 || job.dst_step != 1) return job;
  // The widest lane count whose every lane is readable and writable in each run.
  for (int lanes : {16, 8}) {
    bool fits = src.block == lanes;
    if (!fits) {
      fits = true;
      for (const ChannelRun& r : runs) fits = fits && r.length == lanes;
    }
    if (fits) {
      job.lanes = lanes;
      job.dst_padded = dst.block == lanes;
      break;
    }
  }
  return job;
}

}  // namespace

DirectMaxPool::DirectMaxPool(const DirectMaxPoolShape& shape, const ActivationLayout& src,
                             const ActivationLayout& dst)
    : shape_(shape),
      src_(src),
      dst_(dst),
      runs_(channel_runs(shape.channels, src, dst)) {}

int DirectMaxPool::lanes() const {
  return row_job(shape_, src_, dst_, runs_).lanes;
}

void DirectMaxPool::forward(bool relu, const float* src, float* dst, uint8_t* argmax, CpuIsa isa) const {
  const DirectMaxPoolShape& s = shape_;
  const MaxPoolRowJob job = row_job(s, src_, dst_, runs_);
  const DirectMaxPoolKernels& kernels = direct_max_pool_kernels(isa);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      const float* x = src + n * src_.n_stride + oh * s.kernel * src_.h_stride;
      float* y = dst + n * dst_.n_stride + oh * dst_.h_stride;
      uint8_t* am = argmax ? argmax + (n * s.out_h + oh) * s.out_w * s.channels : nullptr;
      kernels.forward_row(job, relu, x, y, am, s.channels);
    }
}

void DirectMaxPool::backward(const float* diff_dst, const uint8_t* argmax, float* diff_src,
                             CpuIsa isa) const {
  const DirectMaxPoolShape& s = shape_;
  const MaxPoolRowJob job = row_job(s, src_, dst_, runs_);
  const DirectMaxPoolKernels& kernels = direct_max_pool_kernels(isa);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      const float* dy = diff_dst + n * dst_.n_stride + oh * dst_.h_stride;
      const uint8_t* am = argmax + (n * s.out_h + oh) * s.out_w * s.channels;
      float* dx = diff_src + n * src_.n_stride + oh * s.kernel * src_.h_stride;
      kernels.backward_row(job, dy, am, dx, s.channels);
    }
}

}  // namespace sdp::nn
