#include "nn/conv2d.hpp"

#include <cmath>
#include <stdexcept>

#include "nn/init.hpp"

namespace sdp::nn {

using dnnl::algorithm;
using dnnl::prop_kind;

Conv2d::Conv2d(Context& ctx, std::string name, const Conv2dOptions& options)
    : Layer(ctx, std::move(name)), options_(options) {
  const auto& o = options_;
  if (o.in_channels < 1 || o.out_channels < 1 || o.kernel < 1 || o.stride < 1 || o.padding < 0)
    throw std::invalid_argument("Conv2d " + name_ + ": invalid options");
  weight_ = &add_parameter("weight", {o.out_channels, o.in_channels, o.kernel, o.kernel}, true);
  if (o.bias) bias_ = &add_parameter("bias", {o.out_channels}, false);
}

void Conv2d::init_parameters(std::mt19937_64& rng) {
  const auto& o = options_;
  kaiming_normal_fan_out(weight_->value, int64_t{o.out_channels} * o.kernel * o.kernel, rng);
  if (bias_) {
    const float fan_in = static_cast<float>(o.in_channels * o.kernel * o.kernel);
    uniform(bias_->value, 1.0f / std::sqrt(fan_in), rng);
  }
}

memory::desc Conv2d::configure(const memory::desc& src_md, bool training) {
  const auto& o = options_;
  const Dims in = src_md.dims();
  if (in.size() != 4 || in[1] != o.in_channels)
    throw std::invalid_argument("Conv2d " + name_ + ": expected [N, " +
                                std::to_string(o.in_channels) + ", H, W] input");
  const int64_t oh = (in[2] + 2 * o.padding - o.kernel) / o.stride + 1;
  const int64_t ow = (in[3] + 2 * o.padding - o.kernel) / o.stride + 1;
  if (oh < 1 || ow < 1) throw std::invalid_argument("Conv2d " + name_ + ": input too small");
  training_ = training;

  const Dims w_dims = {o.out_channels, o.in_channels, o.kernel, o.kernel};
  const Dims out = {in[0], o.out_channels, oh, ow};
  const Dims strides = {o.stride, o.stride}, pad = {o.padding, o.padding};
  const memory::desc bias_md = plain_md({o.out_channels});
  const auto& eng = cpu_engine();
  // Activation descriptors: oneDNN's choice, or NHWC with channels_last.
  const auto act_md = [&](const Dims& d) {
    return o.channels_last ? memory::desc(d, memory::data_type::f32, memory::format_tag::acdb)
                           : any_md(d);
  };
  const memory::desc src_act = act_md(in);
  const memory::desc dst_act = act_md(out);

  const prop_kind prop = training ? prop_kind::forward_training : prop_kind::forward_inference;
  auto fwd_desc =
      o.bias
          ? dnnl::convolution_forward::desc(prop, algorithm::convolution_direct, src_act,
                                            any_md(w_dims), bias_md, dst_act, strides, pad, pad)
          : dnnl::convolution_forward::desc(prop, algorithm::convolution_direct, src_act,
                                            any_md(w_dims), dst_act, strides, pad, pad);
  dnnl::primitive_attr attr;
  if (o.fuse_relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, attr, eng);
  fwd_ = dnnl::convolution_forward(fwd_pd);
  src_fwd_.configure(src_md, fwd_pd.src_desc());
  weights_user_ = wrap(weight_->value);
  weights_fwd_.configure(weights_user_.get_desc(), fwd_pd.weights_desc());
  if (bias_) {
    bias_user_ = wrap(bias_->value);
    diff_bias_user_ = wrap(bias_->grad);
  }
  dst_ = memory(fwd_pd.dst_desc(), eng);
  const memory::desc dst_md = fwd_pd.dst_desc();
  if (!training) return dst_md;

  if (o.fuse_relu) {
    // ReLU'(pre-activation) == (output > 0), so the fused output is all backward needs.
    const dnnl::eltwise_forward::primitive_desc relu_hint(
        {prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, dst_md, 0.f, 0.f},
        eng);
    relu_bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
        {algorithm::eltwise_relu_use_dst_for_bwd, dst_md, dst_md, 0.f, 0.f}, eng, relu_hint));
    diff_pre_relu_ = memory(dst_md, eng);
  }

  auto bww_desc = o.bias ? dnnl::convolution_backward_weights::desc(
                               algorithm::convolution_direct, src_act, any_md(w_dims), bias_md,
                               dst_act, strides, pad, pad)
                         : dnnl::convolution_backward_weights::desc(algorithm::convolution_direct,
                                                                    src_act, any_md(w_dims),
                                                                    dst_act, strides, pad, pad);
  const dnnl::convolution_backward_weights::primitive_desc bww_pd(bww_desc, eng, fwd_pd);
  bwd_weights_ = dnnl::convolution_backward_weights(bww_pd);
  src_bwd_weights_.configure(fwd_pd.src_desc(), bww_pd.src_desc());
  diff_dst_bwd_weights_.configure(dst_md, bww_pd.diff_dst_desc());
  diff_weights_user_ = wrap(weight_->grad);
  diff_weights_md_ = bww_pd.diff_weights_desc();
  if (diff_weights_md_ == diff_weights_user_.get_desc()) {
    diff_weights_ = diff_weights_user_;
    diff_weights_reorder_ = dnnl::reorder();
  } else {
    diff_weights_ = memory(diff_weights_md_, eng);
    diff_weights_reorder_ = dnnl::reorder(diff_weights_, diff_weights_user_);
  }

  if (needs_input_grad_) {
    const dnnl::convolution_backward_data::primitive_desc bwd_pd(
        {algorithm::convolution_direct, src_act, any_md(w_dims), dst_act, strides, pad, pad},
        eng, fwd_pd);
    bwd_data_ = dnnl::convolution_backward_data(bwd_pd);
    weights_bwd_.configure(weights_user_.get_desc(), bwd_pd.weights_desc());
    diff_dst_bwd_data_.configure(dst_md, bwd_pd.diff_dst_desc());
    diff_src_ = memory(bwd_pd.diff_src_desc(), eng);
    diff_src_out_.configure(bwd_pd.diff_src_desc(), src_md);
  }
  return dst_md;
}

const memory& Conv2d::forward(const memory& src) {
  auto& s = ctx_.stream;
  weights_user_.set_data_handle(weight_->value.raw());
  if (bias_) bias_user_.set_data_handle(bias_->value.raw());
  src_ = src_fwd_.convert(s, src);
  weights_fwd_mem_ = weights_fwd_.convert(s, weights_user_);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_fwd_mem_}, {DNNL_ARG_DST, dst_}};
  if (bias_) args[DNNL_ARG_BIAS] = bias_user_;
  fwd_.execute(s, args);
  return dst_;
}

const memory& Conv2d::backward(const memory& diff_dst) {
  if (!training_) throw std::logic_error("Conv2d " + name_ + ": backward after inference forward");
  auto& s = ctx_.stream;
  const memory* g = &diff_dst;
  if (options_.fuse_relu) {
    relu_bwd_.execute(
        s,
        {{DNNL_ARG_DST, dst_}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_pre_relu_}});
    g = &diff_pre_relu_;
  }

  // Arena views are re-read every step: the store may rebind its gradient arena.
  diff_weights_user_.set_data_handle(weight_->grad.raw());
  if (bias_) diff_bias_user_.set_data_handle(bias_->grad.raw());
  // Weight gradient first so the hook can start reducing it while the input gradient runs.
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_bwd_weights_.convert(s, src_)},
                                          {DNNL_ARG_DIFF_DST, diff_dst_bwd_weights_.convert(s, *g)},
                                          {DNNL_ARG_DIFF_WEIGHTS, diff_weights_}};
  if (bias_) args[DNNL_ARG_DIFF_BIAS] = diff_bias_user_;
  bwd_weights_.execute(s, args);
  if (diff_weights_reorder_) diff_weights_reorder_.execute(s, diff_weights_, diff_weights_user_);
  grads_ready();

  if (!needs_input_grad_) return empty_;
  // The forward already reordered the (unchanged) weights when both layouts agree.
  const memory& w = weights_bwd_.target() == weights_fwd_.target()
                        ? weights_fwd_mem_
                        : weights_bwd_.convert(s, weights_user_);
  bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, diff_dst_bwd_data_.convert(s, *g)},
                        {DNNL_ARG_WEIGHTS, w},
                        {DNNL_ARG_DIFF_SRC, diff_src_}});
  return diff_src_out_.convert(s, diff_src_);
}

}  // namespace sdp::nn
