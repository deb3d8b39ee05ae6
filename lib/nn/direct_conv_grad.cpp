#include "nn/direct_conv_grad.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace sdp::nn {

bool DirectConvWeightGrad::supports(const DirectConvGradShape& s, const ActivationLayout& dy) {
  return (dy.block == 8 || dy.block == 16) && s.kernel >= 1 && s.kernel <= 11 && s.stride >= 1 &&
         s.padding >= 0 && s.padding < s.kernel;
}

DirectConvWeightGrad::DirectConvWeightGrad(const DirectConvGradShape& shape,
                                           const ActivationLayout& diff_dst)
    : shape_(shape), diff_dst_(diff_dst) {
  job_ = {shape.out_channels, shape.in_h,    shape.in_w,    shape.out_h,
          shape.out_w,        shape.kernel,  shape.stride,  shape.padding,
          static_cast<int>(diff_dst.block), diff_dst.c_stride, diff_dst.h_stride, diff_dst.w_stride};
  blocks_ = (shape.out_channels + diff_dst.block - 1) / diff_dst.block;
}

void DirectConvWeightGrad::compute(const float* src, const float* diff_dst, float* dw, float* db,
                                   CpuIsa isa) {
  const DirectConvGradShape& s = shape_;
  const int64_t k2 = int64_t{s.kernel} * s.kernel;
  const int64_t lanes = job_.lanes;
  const int64_t dw_size = blocks_ * k2 * lanes, db_size = blocks_ * lanes;
  const int64_t padded_h = s.in_h + 2 * s.padding, padded_w = s.in_w + 2 * s.padding;
  const int64_t per_thread = dw_size + db_size + padded_h * padded_w;
  const int threads = std::max(1, static_cast<int>(std::min<int64_t>(omp_get_max_threads(), s.batch)));
  scratch_.assign(static_cast<std::size_t>(per_thread * threads), 0.f);
  const DirectConvGradKernels& kernels = direct_conv_grad_kernels(isa);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float* sums = scratch_.data() + t * per_thread;
    float* image = sums + dw_size + db_size;  // its border stays 0
    // A fixed share of the batch per thread, whatever the scheduler does.
    const int64_t first = s.batch * t / threads, last = s.batch * (t + 1) / threads;
    for (int64_t n = first; n < last; ++n) {
      const float* x = src + n * s.in_h * s.in_w;
      for (int64_t h = 0; h < s.in_h; ++h)
        std::memcpy(image + (h + s.padding) * padded_w + s.padding, x + h * s.in_w,
                    static_cast<std::size_t>(s.in_w) * sizeof(float));
      kernels.add_image(job_, image, diff_dst + n * diff_dst_.n_stride, sums, sums + dw_size);
    }
  }
  // The threads' sums in thread order, then out of the blocked order.
  for (int t = 1; t < threads; ++t) {
    const float* part = scratch_.data() + t * per_thread;
    for (int64_t i = 0; i < dw_size + db_size; ++i) scratch_[i] += part[i];
  }
  for (int64_t c = 0; c < s.out_channels; ++c) {
    const int64_t block = c / lanes, lane = c % lanes;
    for (int64_t i = 0; i < k2; ++i) dw[c * k2 + i] = scratch_[(block * k2 + i) * lanes + lane];
    if (db) db[c] = scratch_[dw_size + c];
  }
}

}  // namespace sdp::nn
