#include "nn/onednn_weights.hpp"

namespace sdp::nn {

void OneDnnWeights::configure_forward(Param& weight, Param* bias, const memory::desc& fwd_weights_md) {
  weight_ = &weight;
  bias_ = bias;
  weights_user_ = wrap(weight.value);
  weights_fwd_.configure(weights_user_.get_desc(), fwd_weights_md);
  if (bias_) {
    bias_user_ = wrap(bias_->value);
    diff_bias_user_ = wrap(bias_->grad);
  }
}

void OneDnnWeights::configure_backward_weights(const memory::desc& diff_weights_md) {
  diff_weights_user_ = wrap(weight_->grad);
  if (diff_weights_md == diff_weights_user_.get_desc()) {
    diff_weights_tmp_.reset();
    diff_weights_reorder_ = dnnl::reorder();
  } else {
    diff_weights_tmp_.configure(diff_weights_md);
    diff_weights_reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(
        cpu_engine(), diff_weights_md, cpu_engine(), diff_weights_user_.get_desc()));
  }
}

void OneDnnWeights::configure_backward_data(const memory::desc& bwd_weights_md) {
  weights_bwd_.configure(weights_user_.get_desc(), bwd_weights_md, /*planned=*/true);
}

void OneDnnWeights::execute_forward(dnnl::stream& stream, const dnnl::primitive& forward,
                                    const memory& src, const memory& dst) {
  weights_user_.set_data_handle(weight_->value.raw());
  weights_fwd_mem_ = weights_fwd_.convert(stream, weights_user_);
  ArgMap args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WEIGHTS, weights_fwd_mem_}};
  if (bias_) {
    bias_user_.set_data_handle(bias_->value.raw());
    args[DNNL_ARG_BIAS] = bias_user_;
  }
  forward.execute(stream, args);
}

void OneDnnWeights::add_backward_weights_args(ArgMap& args) {
  diff_weights_user_.set_data_handle(weight_->grad.raw());
  args[DNNL_ARG_DIFF_WEIGHTS] = diff_weights_tmp_ ? diff_weights_tmp_.get() : diff_weights_user_;
  if (bias_) {
    diff_bias_user_.set_data_handle(bias_->grad.raw());
    args[DNNL_ARG_DIFF_BIAS] = diff_bias_user_;
  }
}

void OneDnnWeights::finish_backward_weights(dnnl::stream& stream) {
  if (diff_weights_reorder_)
    diff_weights_reorder_.execute(stream, const_cast<memory&>(diff_weights_tmp_.get()),
                                  diff_weights_user_);
}

void OneDnnWeights::plan_backward(GradientPlan& plan) {
  if (diff_weights_tmp_) diff_weights_tmp_.write(plan);
  // Reordered in backward only when forward's copy has another layout (see below).
  if (!(weights_bwd_.target() == weights_fwd_.target())) weights_bwd_.plan(plan, nullptr);
}

const memory& OneDnnWeights::backward_data_weights(dnnl::stream& stream) {
  // The forward already reordered the (unchanged) weights when both layouts agree.
  if (weights_bwd_.target() == weights_fwd_.target()) return weights_fwd_mem_;
  return weights_bwd_.convert(stream, weights_user_);
}

}  // namespace sdp::nn
