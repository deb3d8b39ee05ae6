// Conv2d: 2-D convolution (square kernel, stride, zero padding, optional bias) on oneDNN.
// Weights live in the parameter arena in PyTorch's OIHW layout; the primitives may pick a
// blocked layout, in which case weights are reordered in and weight gradients out.
// With fuse_relu the output is relu(conv(x)) via a oneDNN post-op, and backward first
// applies the ReLU derivative computed from the stored output.
// With channels_last the input and output (and their gradients) use NHWC (acdb) instead of
// the layout oneDNN would pick: for narrow layers (LeNet's 6 channels) the blocked layouts
// pad channels to 8/16, and NHWC keeps every primitive on the AVX-512 kernels without
// padding or reorders.
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

struct Conv2dOptions {
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 3;
  int stride = 1;
  int padding = 0;
  bool bias = false;
  bool fuse_relu = false;
  bool channels_last = false;
};

class Conv2d : public Layer {
 public:
  Conv2d(Context& ctx, std::string name, const Conv2dOptions& options);

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;
  void init_parameters(std::mt19937_64& rng) override;

  const Conv2dOptions& options() const { return options_; }
  Param& weight() { return *weight_; }
  Param* bias() { return bias_; }

 private:
  Conv2dOptions options_;
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  bool training_ = false;

  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights bwd_weights_;
  dnnl::eltwise_backward relu_bwd_;
  memory dst_, diff_src_, diff_pre_relu_, weights_user_, diff_weights_user_, bias_user_,
      diff_bias_user_;
  memory::desc diff_weights_md_;
  memory diff_weights_;  // primitive-layout weight gradient when it is not plain OIHW
  dnnl::reorder diff_weights_reorder_;  // diff_weights_ -> arena, when they differ
  memory weights_fwd_mem_;              // weights in the forward primitive's layout
  LayoutAdapter src_fwd_, weights_fwd_, weights_bwd_, diff_dst_bwd_data_, src_bwd_weights_,
      diff_dst_bwd_weights_, diff_src_out_;
  memory src_;  // input kept for the weight gradient
};

}  // namespace sdp::nn
