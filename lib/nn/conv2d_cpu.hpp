// Conv2dCpu: Conv2d on oneDNN. The primitives may pick blocked layouts for weights and
// activations (channels_last pins NHWC); with fuse_relu the ReLU is a oneDNN post-op and
// backward applies its derivative from the stored output. With one input channel the weight
// gradient is computed by nn/direct_conv_grad.hpp instead of oneDNN.
#pragma once

#include <optional>

#include "nn/conv2d.hpp"
#include "nn/direct_conv_grad.hpp"
#include "nn/onednn.hpp"
#include "nn/onednn_weights.hpp"

namespace sdp::nn {

class Conv2dCpu final : public OneDnnLayer<Conv2d> {
 public:
  Conv2dCpu(Context& ctx, std::string name, const Conv2dOptions& options)
      : OneDnnLayer<Conv2d>(ctx, std::move(name), options) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  bool training_ = false;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights bwd_weights_;
  dnnl::eltwise_backward relu_bwd_;
  memory dst_;
  PlannedMemory diff_src_, diff_pre_relu_;
  OneDnnWeights weights_;
  LayoutAdapter src_fwd_;
  LayoutAdapter diff_dst_bwd_data_, src_bwd_weights_, diff_dst_bwd_weights_, diff_src_out_;
  memory src_;  // input kept for the weight gradient
  std::optional<DirectConvWeightGrad> direct_weight_grad_;  // instead of bwd_weights_
};

}  // namespace sdp::nn
