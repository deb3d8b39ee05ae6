#include "nn/batchnorm2d_cpu.hpp"

#include <stdexcept>

namespace sdp::nn {

using dnnl::normalization_flags;
using dnnl::prop_kind;

memory::desc BatchNorm2dCpu::configure_md(const memory::desc& src_md, bool training) {
  const Dims in = src_md.dims();
  check_input(to_shape(in));
  training_ = training;
  reduce_count_ = in[0] * in[2] * in[3];
  const auto& eng = cpu_engine();
  scale_ = wrap(weight_->value);
  shift_ = wrap(bias_->value);
  diff_scale_ = wrap(weight_->grad);
  diff_shift_ = wrap(bias_->grad);
  running_mean_mem_ = wrap(running_mean_->value);
  running_var_mem_ = wrap(running_var_->value);

  auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
  if (options_.fuse_relu) flags |= normalization_flags::fuse_norm_relu;
  if (!training) flags |= normalization_flags::use_global_stats;
  const prop_kind prop = training ? prop_kind::forward_training : prop_kind::forward_inference;
  const dnnl::batch_normalization_forward::primitive_desc fwd_pd(
      {prop, src_md, options_.eps, flags}, eng);
  fwd_ = dnnl::batch_normalization_forward(fwd_pd);
  dst_ = memory(fwd_pd.dst_desc(), eng);
  diff_src_.reset();
  if (!training) return fwd_pd.dst_desc();

  mean_ = memory(fwd_pd.mean_desc(), eng);
  var_ = memory(fwd_pd.variance_desc(), eng);
  if (options_.fuse_relu) workspace_ = memory(fwd_pd.workspace_desc(), eng);
  const dnnl::batch_normalization_backward::primitive_desc bwd_pd(
      {prop_kind::backward, fwd_pd.dst_desc(), src_md, options_.eps, flags}, eng, fwd_pd);
  bwd_ = dnnl::batch_normalization_backward(bwd_pd);
  diff_src_.configure(bwd_pd.diff_src_desc());
  return fwd_pd.dst_desc();
}

const memory& BatchNorm2dCpu::forward_md(const memory& src) {
  auto& s = stream();
  scale_.set_data_handle(weight_->value.raw());
  shift_.set_data_handle(bias_->value.raw());
  src_ = src;
  if (!training_) {
    fwd_.execute(s, {{DNNL_ARG_SRC, src},
                     {DNNL_ARG_MEAN, running_mean_mem_},
                     {DNNL_ARG_VARIANCE, running_var_mem_},
                     {DNNL_ARG_SCALE, scale_},
                     {DNNL_ARG_SHIFT, shift_},
                     {DNNL_ARG_DST, dst_}});
    return dst_;
  }
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src},       {DNNL_ARG_MEAN, mean_},
                                          {DNNL_ARG_VARIANCE, var_}, {DNNL_ARG_SCALE, scale_},
                                          {DNNL_ARG_SHIFT, shift_},  {DNNL_ARG_DST, dst_}};
  if (options_.fuse_relu) args[DNNL_ARG_WORKSPACE] = workspace_;
  fwd_.execute(s, args);

  update_running_stats_host(static_cast<const float*>(mean_.get_data_handle()),
                            static_cast<const float*>(var_.get_data_handle()), reduce_count_);
  return dst_;
}

const memory& BatchNorm2dCpu::backward_md(const memory& diff_dst) {
  if (!training_)
    throw std::logic_error("BatchNorm2d " + name_ + ": backward after inference forward");
  // Arena views are re-read every step: the store may rebind its gradient arena.
  diff_scale_.set_data_handle(weight_->grad.raw());
  diff_shift_.set_data_handle(bias_->grad.raw());
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_},
                                          {DNNL_ARG_MEAN, mean_},
                                          {DNNL_ARG_VARIANCE, var_},
                                          {DNNL_ARG_DIFF_DST, diff_dst},
                                          {DNNL_ARG_SCALE, scale_},
                                          {DNNL_ARG_SHIFT, shift_},  // oneDNN 2.6 requires it
                                          {DNNL_ARG_DIFF_SRC, diff_src_.get()},
                                          {DNNL_ARG_DIFF_SCALE, diff_scale_},
                                          {DNNL_ARG_DIFF_SHIFT, diff_shift_}};
  if (options_.fuse_relu) args[DNNL_ARG_WORKSPACE] = workspace_;
  bwd_.execute(stream(), args);
  grads_ready();
  // oneDNN computes the input gradient together with the parameter gradients.
  return needs_input_grad_ ? diff_src_.get() : empty_;
}

GradientPlan::Buffer* BatchNorm2dCpu::plan_backward_md(GradientPlan& plan,
                                                       GradientPlan::Buffer* /*diff_dst*/) {
  // Written even when nobody needs it: oneDNN computes it with the parameter gradients.
  GradientPlan::Buffer* diff_src = diff_src_.write(plan);
  return needs_input_grad_ ? diff_src : nullptr;
}

}  // namespace sdp::nn
