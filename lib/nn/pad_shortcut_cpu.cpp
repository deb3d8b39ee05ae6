#include "nn/pad_shortcut_cpu.hpp"

#include <stdexcept>

#include "nn/pad_shortcut_rule.hpp"

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

PadShortcutGeometry PadShortcutCpu::geometry() const {
  return {in_dims_[0], in_dims_[1], in_dims_[2], in_dims_[3], out_dims_[1], out_dims_[2],
          out_dims_[3], stride_,      (out_dims_[1] - in_dims_[1]) / 2};
}

const memory& PadShortcutCpu::forward_md(const memory& src) {
  const float* x =
      static_cast<const float*>(src_to_plain_.convert(stream(), src).get_data_handle());
  float* y = static_cast<float*>(dst_.get_data_handle());
  // Every output element is written (padded channels with 0), so no clearing pass.
  const PadShortcutGeometry g = geometry();
  const int64_t total = g.n * g.oc * g.oh * g.ow;
  for (int64_t o = 0; o < total; ++o) {
    const int64_t from = pad_shortcut_source(g, o);
    y[o] = from < 0 ? 0.0f : x[from];
  }
  return dst_;
}

const memory& PadShortcutCpu::backward_md(const memory& diff_dst) {
  if (!needs_input_grad_) return empty_;
  const float* dy = static_cast<const float*>(diff_dst.get_data_handle());
  float* dx = static_cast<float*>(diff_src_plain_.get().get_data_handle());
  const PadShortcutGeometry g = geometry();
  const int64_t total = g.n * g.c * g.h * g.w;
  for (int64_t i = 0; i < total; ++i) {
    const int64_t from = pad_shortcut_grad_source(g, i);
    dx[i] = from < 0 ? 0.0f : dy[from];
  }
  return diff_to_src_.convert(stream(), diff_src_plain_.get());
}

GradientPlan::Buffer* PadShortcutCpu::plan_backward_md(GradientPlan& plan,
                                                       GradientPlan::Buffer* /*diff_dst*/) {
  // Every element of the plain gradient is written (0 where the subsampling skipped it), so a
  // shared buffer's old contents never leak through.
  if (!needs_input_grad_) return nullptr;
  return diff_to_src_.plan(plan, diff_src_plain_.write(plan));
}

}  // namespace sdp::nn
