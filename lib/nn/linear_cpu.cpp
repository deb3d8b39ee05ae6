#include "nn/linear_cpu.hpp"

#include <stdexcept>

namespace sdp::nn {

using dnnl::prop_kind;

memory::desc LinearCpu::configure_md(const memory::desc& src_md, bool training) {
  const Dims in = src_md.dims();
  check_input(to_shape(in));
  training_ = training;
  const auto& eng = cpu_engine();
  const Dims w_dims = {options_.out_features, options_.in_features};
  const Dims out = {in[0], options_.out_features};
  const memory::desc bias_md = plain_md({options_.out_features});
  const prop_kind prop = training ? prop_kind::forward_training : prop_kind::forward_inference;
  auto fwd_desc =
      bias_
          ? dnnl::inner_product_forward::desc(prop, src_md, any_md(w_dims), bias_md, plain_md(out))
          : dnnl::inner_product_forward::desc(prop, src_md, any_md(w_dims), plain_md(out));
  const dnnl::inner_product_forward::primitive_desc fwd_pd(fwd_desc, eng);
  fwd_ = dnnl::inner_product_forward(fwd_pd);
  src_fwd_.configure(src_md, fwd_pd.src_desc());
  weights_.configure_forward(*weight_, bias_, fwd_pd.weights_desc());
  dst_ = memory(fwd_pd.dst_desc(), eng);
  diff_src_.reset();
  if (!training) return fwd_pd.dst_desc();

  auto bww_desc = bias_ ? dnnl::inner_product_backward_weights::desc(
                              fwd_pd.src_desc(), any_md(w_dims), bias_md, fwd_pd.dst_desc())
                        : dnnl::inner_product_backward_weights::desc(
                              fwd_pd.src_desc(), any_md(w_dims), fwd_pd.dst_desc());
  const dnnl::inner_product_backward_weights::primitive_desc bww_pd(bww_desc, eng, fwd_pd);
  bwd_weights_ = dnnl::inner_product_backward_weights(bww_pd);
  weights_.configure_backward_weights(bww_pd.diff_weights_desc());
  if (needs_input_grad_) {
    const dnnl::inner_product_backward_data::primitive_desc bwd_pd(
        {src_md, any_md(w_dims), fwd_pd.dst_desc()}, eng, fwd_pd);
    bwd_data_ = dnnl::inner_product_backward_data(bwd_pd);
    weights_.configure_backward_data(bwd_pd.weights_desc());
    diff_src_.configure(bwd_pd.diff_src_desc());
  }
  return fwd_pd.dst_desc();
}

const memory& LinearCpu::forward_md(const memory& src) {
  auto& s = stream();
  src_ = src_fwd_.convert(s, src);
  weights_.execute_forward(s, fwd_, src_, dst_);
  return dst_;
}

const memory& LinearCpu::backward_md(const memory& diff_dst) {
  if (!training_) throw std::logic_error("Linear " + name_ + ": backward after inference forward");
  auto& s = stream();
  ArgMap args = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, diff_dst}};
  weights_.add_backward_weights_args(args);
  bwd_weights_.execute(s, args);
  weights_.finish_backward_weights(s);
  grads_ready();

  if (!needs_input_grad_) return empty_;
  bwd_data_.execute(s, {{DNNL_ARG_DIFF_DST, diff_dst},
                        {DNNL_ARG_WEIGHTS, weights_.backward_data_weights(s)},
                        {DNNL_ARG_DIFF_SRC, diff_src_.get()}});
  return diff_src_.get();
}

GradientPlan::Buffer* LinearCpu::plan_backward_md(GradientPlan& plan,
                                                  GradientPlan::Buffer* /*diff_dst*/) {
  weights_.plan_backward(plan);
  return needs_input_grad_ ? diff_src_.write(plan) : nullptr;
}

}  // namespace sdp::nn
