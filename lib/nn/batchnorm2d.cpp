#include "nn/batchnorm2d.hpp"

#include <stdexcept>

namespace sdp::nn {

using dnnl::normalization_flags;
using dnnl::prop_kind;

BatchNorm2d::BatchNorm2d(Context& ctx, std::string name, const BatchNorm2dOptions& options)
    : Layer(ctx, std::move(name)), options_(options) {
  if (options_.channels < 1) throw std::invalid_argument("BatchNorm2d " + name_ + ": channels < 1");
  const Shape c = {options_.channels};
  weight_ = &add_parameter("weight", c, false);
  bias_ = &add_parameter("bias", c, false);
  running_mean_ = &add_buffer("running_mean", c);
  running_var_ = &add_buffer("running_var", c);
}

void BatchNorm2d::init_parameters(std::mt19937_64& /*rng*/) {
  weight_->value.fill(1.0f);
  bias_->value.fill(0.0f);
  running_mean_->value.fill(0.0f);
  running_var_->value.fill(1.0f);
}

memory::desc BatchNorm2d::configure(const memory::desc& src_md, bool training) {
  const Dims in = src_md.dims();
  if (in.size() != 4 || in[1] != options_.channels)
    throw std::invalid_argument("BatchNorm2d " + name_ + ": expected [N, " +
                                std::to_string(options_.channels) + ", H, W] input");
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
  if (!training) return fwd_pd.dst_desc();

  mean_ = memory(fwd_pd.mean_desc(), eng);
  var_ = memory(fwd_pd.variance_desc(), eng);
  if (options_.fuse_relu) workspace_ = memory(fwd_pd.workspace_desc(), eng);
  const dnnl::batch_normalization_backward::primitive_desc bwd_pd(
      {prop_kind::backward, fwd_pd.dst_desc(), src_md, options_.eps, flags}, eng, fwd_pd);
  bwd_ = dnnl::batch_normalization_backward(bwd_pd);
  diff_src_ = memory(bwd_pd.diff_src_desc(), eng);
  return fwd_pd.dst_desc();
}

const memory& BatchNorm2d::forward(const memory& src) {
  auto& s = ctx_.stream;
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

  // Running statistics as PyTorch keeps them: the variance is unbiased (n / (n - 1)).
  const float m = options_.momentum;
  const float unbias =
      reduce_count_ > 1 ? static_cast<float>(reduce_count_) / static_cast<float>(reduce_count_ - 1)
                        : 1.0f;
  const float* mean = static_cast<const float*>(mean_.get_data_handle());
  const float* var = static_cast<const float*>(var_.get_data_handle());
  float* rm = running_mean_->value.data<float>();
  float* rv = running_var_->value.data<float>();
  for (int c = 0; c < options_.channels; ++c) {
    rm[c] = (1.0f - m) * rm[c] + m * mean[c];
    rv[c] = (1.0f - m) * rv[c] + m * var[c] * unbias;
  }
  return dst_;
}

const memory& BatchNorm2d::backward(const memory& diff_dst) {
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
                                          {DNNL_ARG_DIFF_SRC, diff_src_},
                                          {DNNL_ARG_DIFF_SCALE, diff_scale_},
                                          {DNNL_ARG_DIFF_SHIFT, diff_shift_}};
  if (options_.fuse_relu) args[DNNL_ARG_WORKSPACE] = workspace_;
  bwd_.execute(ctx_.stream, args);
  grads_ready();
  // oneDNN computes the input gradient together with the parameter gradients.
  return needs_input_grad_ ? diff_src_ : empty_;
}

}  // namespace sdp::nn
