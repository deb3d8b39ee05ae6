#include "nn/dropout_cpu.hpp"

#include <functional>
#include <stdexcept>

#include "nn/dropout_rule.hpp"

namespace sdp::nn {

memory::desc DropoutCpu::configure_md(const memory::desc& src_md, bool training) {
  training_ = training;
  // Elementwise over the stored buffer, so any layout works; padding stays zero.
  const std::size_t n = src_md.get_size() / sizeof(float);
  if (training && p_ > 0.0f) {
    if (mask_.size() != n) mask_ready_ = false;
    mask_.resize(n);
    dst_ = memory(src_md, cpu_engine());
    diff_src_.configure(src_md);
  }
  return src_md;
}

const memory& DropoutCpu::forward_md(const memory& src) {
  if (!training_ || p_ == 0.0f) return src;
  draw_mask();
  const float* x = static_cast<const float*>(src.get_data_handle());
  float* y = static_cast<float*>(dst_.get_data_handle());
  for (std::size_t i = 0; i < mask_.size(); ++i) y[i] = dropout_apply(x[i], mask_[i]);
  return dst_;
}

const memory& DropoutCpu::backward_md(const memory& diff_dst) {
  if (!needs_input_grad_) return empty_;
  if (!training_ || p_ == 0.0f) return diff_dst;
  const float* dy = static_cast<const float*>(diff_dst.get_data_handle());
  float* dx = static_cast<float*>(diff_src_.get().get_data_handle());
  for (std::size_t i = 0; i < mask_.size(); ++i) dx[i] = dropout_apply(dy[i], mask_[i]);
  return diff_src_.get();
}

GradientPlan::Buffer* DropoutCpu::plan_backward_md(GradientPlan& plan,
                                                   GradientPlan::Buffer* diff_dst) {
  if (!needs_input_grad_) return nullptr;
  if (!training_ || p_ == 0.0f) return diff_dst;  // the identity hands diff_dst through
  return diff_src_.write(plan);
}

}  // namespace sdp::nn
