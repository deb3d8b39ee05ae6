#include "nn/conv2d_cpu.hpp"

namespace sdp::nn {

using dnnl::algorithm;
using dnnl::prop_kind;

memory::desc Conv2dCpu::configure_md(const memory::desc& src_md, bool training) {
  const auto& o = options_;
  const Dims in = src_md.dims();
  const Dims out = to_dims(output_shape(to_shape(in)));
  training_ = training;

  const Dims w_dims = {o.out_channels, o.in_channels, o.kernel, o.kernel};
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
  weights_.configure_forward(*weight_, bias_, fwd_pd.weights_desc());
  dst_ = memory(fwd_pd.dst_desc(), eng);
  const memory::desc dst_md = fwd_pd.dst_desc();
  diff_pre_relu_.reset();
  diff_src_.reset();
  if (!training) return dst_md;

  if (o.fuse_relu) {
    // ReLU'(pre-activation) == (output > 0), so the fused output is all backward needs.
    const dnnl::eltwise_forward::primitive_desc relu_hint(
        {prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, dst_md, 0.f, 0.f},
        eng);
    relu_bwd_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
        {algorithm::eltwise_relu_use_dst_for_bwd, dst_md, dst_md, 0.f, 0.f}, eng, relu_hint));
    diff_pre_relu_.configure(dst_md);
  }

  // One input channel, given plain: the direct weight gradient reads it as it is.
  direct_weight_grad_.reset();
  const std::optional<ActivationLayout> dst_layout = activation_layout(dst_md);
  const DirectConvGradShape direct_shape{in[0],  o.out_channels, in[2],    in[3],    out[2],
                                         out[3], o.kernel,       o.stride, o.padding};
  if (o.in_channels == 1 && dst_layout && fwd_pd.src_desc() == plain_md(in) &&
      DirectConvWeightGrad::supports(direct_shape, *dst_layout)) {
    direct_weight_grad_.emplace(direct_shape, *dst_layout);
  } else {
    auto bww_desc = o.bias ? dnnl::convolution_backward_weights::desc(
                                 algorithm::convolution_direct, src_act, any_md(w_dims), bias_md,
                                 dst_act, strides, pad, pad)
                           : dnnl::convolution_backward_weights::desc(
                                 algorithm::convolution_direct, src_act, any_md(w_dims), dst_act,
                                 strides, pad, pad);
    const dnnl::convolution_backward_weights::primitive_desc bww_pd(bww_desc, eng, fwd_pd);
    bwd_weights_ = dnnl::convolution_backward_weights(bww_pd);
    src_bwd_weights_.configure(fwd_pd.src_desc(), bww_pd.src_desc(), /*planned=*/true);
    diff_dst_bwd_weights_.configure(dst_md, bww_pd.diff_dst_desc(), true);
    weights_.configure_backward_weights(bww_pd.diff_weights_desc());
  }

  if (needs_input_grad_) {
    const dnnl::convolution_backward_data::primitive_desc bwd_pd(
        {algorithm::convolution_direct, src_act, any_md(w_dims), dst_act, strides, pad, pad},
        eng, fwd_pd);
    bwd_data_ = dnnl::convolution_backward_data(bwd_pd);
    weights_.configure_backward_data(bwd_pd.weights_desc());
    diff_dst_bwd_data_.configure(dst_md, bwd_pd.diff_dst_desc(), true);
    diff_src_.configure(bwd_pd.diff_src_desc());
    diff_src_out_.configure(bwd_pd.diff_src_desc(), src_md, true);
  }
  return dst_md;
}

const memory& Conv2dCpu::forward_md(const memory& src) {
  auto& s = stream();
  src_ = src_fwd_.convert(s, src);
  weights_.execute_forward(s, fwd_, src_, dst_);
  return dst_;
}

const memory& Conv2dCpu::backward_md(const memory& diff_dst) {
  if (!training_) throw std::logic_error("Conv2d " + name_ + ": backward after inference forward");
  auto& s = stream();
  const memory* g = &diff_dst;
  if (options_.fuse_relu) {
    relu_bwd_.execute(s, {{DNNL_ARG_DST, dst_},
                          {DNNL_ARG_DIFF_DST, diff_dst},
                          {DNNL_ARG_DIFF_SRC, diff_pre_relu_.get()}});
    g = &diff_pre_relu_.get();
  }

  // Weight gradient first so the hook can start reducing it while the input gradient runs.
  if (direct_weight_grad_) {
    direct_weight_grad_->compute(static_cast<const float*>(src_.get_data_handle()),
                                 static_cast<const float*>(g->get_data_handle()),
                                 weight_->grad.data<float>(), bias_ ? bias_->grad.data<float>() : nullptr);
  } else {
    ArgMap args = {{DNNL_ARG_SRC, src_bwd_weights_.convert(s, src_)},
                   {DNNL_ARG_DIFF_DST, diff_dst_bwd_weights_.convert(s, *g)}};
    weights_.add_backward_weights_args(args);
    bwd_weights_.execute(s, args);
    weights_.finish_backward_weights(s);
  }
  grads_ready();

  if (!needs_input_grad_) return empty_;
  bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, diff_dst_bwd_data_.convert(s, *g)},
                        {DNNL_ARG_WEIGHTS, weights_.backward_data_weights(s)},
                        {DNNL_ARG_DIFF_SRC, diff_src_.get()}});
  return diff_src_out_.convert(s, diff_src_.get());
}

GradientPlan::Buffer* Conv2dCpu::plan_backward_md(GradientPlan& plan,
                                                  GradientPlan::Buffer* diff_dst) {
  GradientPlan::Buffer* g = options_.fuse_relu ? diff_pre_relu_.write(plan) : diff_dst;
  if (!direct_weight_grad_) {
    src_bwd_weights_.plan(plan, nullptr);
    diff_dst_bwd_weights_.plan(plan, g);
  }
  weights_.plan_backward(plan);
  if (!needs_input_grad_) return nullptr;
  diff_dst_bwd_data_.plan(plan, g);
  return diff_src_out_.plan(plan, diff_src_.write(plan));
}

}  // namespace sdp::nn
