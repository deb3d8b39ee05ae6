#include "nn/linear.hpp"

#include <cmath>
#include <stdexcept>

#include "nn/init.hpp"

namespace sdp::nn {

using dnnl::prop_kind;

Linear::Linear(Context& ctx, std::string name, const LinearOptions& options)
    : Layer(ctx, std::move(name)), options_(options) {
  if (options_.in_features < 1 || options_.out_features < 1)
    throw std::invalid_argument("Linear " + name_ + ": invalid options");
  weight_ = &add_parameter("weight", {options_.out_features, options_.in_features}, true);
  if (options_.bias) bias_ = &add_parameter("bias", {options_.out_features}, false);
}

void Linear::init_parameters(std::mt19937_64& rng) {
  // kaiming_uniform_(a=sqrt(5)) reduces to U(+-1/sqrt(fan_in)); the bias uses the same bound.
  const float bound = 1.0f / std::sqrt(static_cast<float>(options_.in_features));
  uniform(weight_->value, bound, rng);
  if (bias_) uniform(bias_->value, bound, rng);
}

memory::desc Linear::configure(const memory::desc& src_md, bool training) {
  const Dims in = src_md.dims();
  if (in.size() != 2 || in[1] != options_.in_features)
    throw std::invalid_argument("Linear " + name_ + ": expected [N, " +
                                std::to_string(options_.in_features) + "] input");
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
  weights_user_ = wrap(weight_->value);
  weights_fwd_.configure(weights_user_.get_desc(), fwd_pd.weights_desc());
  if (bias_) {
    bias_user_ = wrap(bias_->value);
    diff_bias_user_ = wrap(bias_->grad);
  }
  dst_ = memory(fwd_pd.dst_desc(), eng);
  if (!training) return fwd_pd.dst_desc();

  auto bww_desc = bias_ ? dnnl::inner_product_backward_weights::desc(
                              fwd_pd.src_desc(), any_md(w_dims), bias_md, fwd_pd.dst_desc())
                        : dnnl::inner_product_backward_weights::desc(
                              fwd_pd.src_desc(), any_md(w_dims), fwd_pd.dst_desc());
  const dnnl::inner_product_backward_weights::primitive_desc bww_pd(bww_desc, eng, fwd_pd);
  bwd_weights_ = dnnl::inner_product_backward_weights(bww_pd);
  diff_weights_user_ = wrap(weight_->grad);
  if (bww_pd.diff_weights_desc() == diff_weights_user_.get_desc()) {
    diff_weights_ = diff_weights_user_;
    diff_weights_reorder_ = dnnl::reorder();
  } else {
    diff_weights_ = memory(bww_pd.diff_weights_desc(), eng);
    diff_weights_reorder_ = dnnl::reorder(diff_weights_, diff_weights_user_);
  }
  if (needs_input_grad_) {
    const dnnl::inner_product_backward_data::primitive_desc bwd_pd(
        {src_md, any_md(w_dims), fwd_pd.dst_desc()}, eng, fwd_pd);
    bwd_data_ = dnnl::inner_product_backward_data(bwd_pd);
    weights_bwd_.configure(weights_user_.get_desc(), bwd_pd.weights_desc());
    diff_src_ = memory(bwd_pd.diff_src_desc(), eng);
  }
  return fwd_pd.dst_desc();
}

const memory& Linear::forward(const memory& src) {
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

const memory& Linear::backward(const memory& diff_dst) {
  if (!training_) throw std::logic_error("Linear " + name_ + ": backward after inference forward");
  auto& s = ctx_.stream;
  // Arena views are re-read every step: the store may rebind its gradient arena.
  diff_weights_user_.set_data_handle(weight_->grad.raw());
  if (bias_) diff_bias_user_.set_data_handle(bias_->grad.raw());
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_weights_}};
  if (bias_) args[DNNL_ARG_DIFF_BIAS] = diff_bias_user_;
  bwd_weights_.execute(s, args);
  if (diff_weights_reorder_) diff_weights_reorder_.execute(s, diff_weights_, diff_weights_user_);
  grads_ready();

  if (!needs_input_grad_) return empty_;
  const memory& w = weights_bwd_.target() == weights_fwd_.target()
                        ? weights_fwd_mem_
                        : weights_bwd_.convert(s, weights_user_);
  bwd_data_.execute(
      s, {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, diff_src_}});
  return diff_src_;
}

}  // namespace sdp::nn
