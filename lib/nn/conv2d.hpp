// Conv2d: 2-D convolution (square kernel, stride, zero padding, optional bias). Weights
// live in the parameter arena in PyTorch's OIHW layout on every device; an implementation
// whose kernels want another layout reorders weights in and weight gradients out.
// With fuse_relu the output is relu(conv(x)) via a oneDNN post-op, and backward first
// applies the ReLU derivative computed from the stored output.
// With channels_last the input and output (and their gradients) use NHWC (acdb) instead of
// the layout the backend would pick: for narrow layers (LeNet's 6 channels) the blocked layouts
// pad channels to 8/16, and NHWC keeps every primitive on the AVX-512 kernels without
// padding or reorders.
#pragma once

#include <memory>

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
  const char* kind() const override { return "conv"; }
  static std::unique_ptr<Conv2d> create(Context& ctx, std::string name, const Conv2dOptions& options);

  void init_parameters(std::mt19937_64& rng) override;
  const Conv2dOptions& options() const { return options_; }
  Param& weight() { return *weight_; }
  Param* bias() { return bias_; }

  // model.grad_sum: fused. A residual block's input gradient, d(branch input) + d(shortcut
  // input), made in its branch's first convolution's input gradient pass: backward returns
  // conv_dgrad(dy, w) + the addend given with set_input_grad_addend before it (the plan's buffer
  // with set_planned_input_grad_addend before plan_backward), summed in the pass's epilogue. The
  // block asks after every training configure; "" when this layer's pass will, otherwise why not
  // (only a GPU's NHWC 16-bit convolution, with cuDNN's graphs, can).
  virtual std::string add_to_input_grad() {
    return "the gradient sum in the convolution's pass is a GPU's (cuDNN graphs on NHWC 16-bit activations)";
  }
  virtual void set_input_grad_addend(const TensorRef& /*addend*/) {}
  virtual void set_planned_input_grad_addend(GradientPlan::Buffer* /*addend*/) {}

 protected:
  Conv2d(Context& ctx, std::string name, const Conv2dOptions& options);
  // Output spatial size for an input of `in` ([N, C, H, W]); throws for a wrong shape.
  Shape output_shape(const Shape& in) const;

  Conv2dOptions options_;
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
};

}  // namespace sdp::nn
