#include "nn/pad_shortcut_cpu.hpp"

#include <cstring>
#include <stdexcept>

namespace sdp::nn {

memory::desc PadShortcutCpu::configure_md(const memory::desc& src_md, bool training) {
  in_dims_ = src_md.dims();
  if (in_dims_.size() != 4 || in_dims_[1] != in_channels_)
    throw std::invalid_argument("PadShortcut " + name_ + ": unexpected input shape");
  const int64_t s = stride_;
  out_dims_ = {in_dims_[0], out_channels_, (in_dims_[2] + s - 1) / s, (in_dims_[3] + s - 1) / s};
  const auto& eng = cpu_engine();
  src_to_plain_.configure(src_md, plain_md(in_dims_));
  dst_ = memory(plain_md(out_dims_), eng);  // zero channels are written once per forward
  diff_src_plain_.reset();
  if (training && needs_input_grad_) {
    diff_src_plain_.configure(plain_md(in_dims_));
    diff_to_src_.configure(plain_md(in_dims_), src_md, /*planned=*/true);
  }
  return dst_.get_desc();
}

const memory& PadShortcutCpu::forward_md(const memory& src) {
  const float* x =
      static_cast<const float*>(src_to_plain_.convert(stream(), src).get_data_handle());
  float* y = static_cast<float*>(dst_.get_data_handle());
  const int64_t n = in_dims_[0], c = in_dims_[1], h = in_dims_[2], w = in_dims_[3];
  const int64_t oc = out_dims_[1], oh = out_dims_[2], ow = out_dims_[3];
  const int64_t pad = (oc - c) / 2;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < oc; ++k) {
      float* yp = y + (i * oc + k) * oh * ow;
      const int64_t src_c = k - pad;
      if (src_c < 0 || src_c >= c) {
        std::memset(yp, 0, sizeof(float) * oh * ow);
        continue;
      }
      const float* xp = x + (i * c + src_c) * h * w;
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) yp[r * ow + q] = xp[r * stride_ * w + q * stride_];
    }
  }
  return dst_;
}

const memory& PadShortcutCpu::backward_md(const memory& diff_dst) {
  if (!needs_input_grad_) return empty_;
  const float* dy = static_cast<const float*>(diff_dst.get_data_handle());
  float* dx = static_cast<float*>(diff_src_plain_.get().get_data_handle());
  const int64_t n = in_dims_[0], c = in_dims_[1], h = in_dims_[2], w = in_dims_[3];
  const int64_t oc = out_dims_[1], oh = out_dims_[2], ow = out_dims_[3];
  const int64_t pad = (oc - c) / 2;
  if (stride_ > 1) std::memset(dx, 0, sizeof(float) * n * c * h * w);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k) {
      const float* dyp = dy + (i * oc + k + pad) * oh * ow;
      float* dxp = dx + (i * c + k) * h * w;
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) dxp[r * stride_ * w + q * stride_] = dyp[r * ow + q];
    }
  return diff_to_src_.convert(stream(), diff_src_plain_.get());
}

GradientPlan::Buffer* PadShortcutCpu::plan_backward_md(GradientPlan& plan,
                                                       GradientPlan::Buffer* /*diff_dst*/) {
  // Every element of the plain gradient is written (zeroed first when strided), so a
  // shared buffer's old contents never leak through.
  if (!needs_input_grad_) return nullptr;
  return diff_to_src_.plan(plan, diff_src_plain_.write(plan));
}

}  // namespace sdp::nn
