// ResidualBlock: y = relu(branch(x) + shortcut(x)), a composite layer made of child
// layers, the same on every device (its children come from the device's factories). The branch is registered before the shortcut (torchvision's order: conv1, bn1,
// ..., downsample), and backward runs the shortcut first, then the branch, so
// parameters become final exactly in reverse registration order.
//
// When the branch ends in a BatchNorm2d that can fuse the sum and the ReLU
// (BatchNorm2d::fuse_residual_add_relu: cuDNN on NHWC 16-bit), the block runs the shortcut
// first and hands its output to that BatchNorm, and has no Add or ReLU of its own to run;
// backward still reports the shortcut's gradients before the branch's. Otherwise, where the
// device's Add can, the sum writes relu(sum) in its one pass (Add::set_relu_fused), and the
// sum of the input gradients applies the ReLU derivative of the block before, whose own ReLU
// backward is then skipped (Layer::set_input_grad_relu_gated; Model::configure pairs them). (Having the branch's
// first convolution add its input gradient into the shortcut's, cuDNN's beta = 1, instead of
// the block's sum was measured slower on an H100: +6.1 ms of convolution for -4.1 ms of sums.)
//
// With model.batchnorm: folded (Context::batchnorm_folding), every configure asks each
// BatchNorm between two of the branch's convolutions to fold into them (BatchNorm2d::fold_between:
// bn1 and bn2 of a bottleneck, bn1 of a basic block); with Context::batchnorm_folding's
// with_residual, each training configure also asks the branch's last BatchNorm, the fused sum
// above, to fold after the convolution before it (BatchNorm2d::fold_with_residual_after), and a
// projection shortcut's BatchNorm to fold into that one (fold_into_residual_of). With
// model.grad_sum: fused (Context::grad_sum_fusion), a block whose BatchNorm fuses its sum has its
// branch's first convolution add the shortcut's input gradient in its own input gradient pass
// (Conv2d::add_to_input_grad): no gradient sum of its own. (Asking cuDNN's legacy dgrad for
// this with beta = 1 was the slower way, above.)
//
// Factories build the blocks of He et al.: basic (two 3x3 convs) and bottleneck
// (1x1, 3x3 with the stride, 1x1 with 4x channels, as torchvision's ResNet v1.5).
#pragma once

#include <memory>
#include <vector>

#include "nn/add.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/layer.hpp"
#include "nn/relu.hpp"

namespace sdp::nn {

// How the shortcut matches shapes when the block changes them.
enum class ShortcutKind {
  kPad,         // option A: subsample + zero channels, no parameters (CIFAR ResNets)
  kProjection,  // option B: 1x1 conv (stride) + BatchNorm (torchvision "downsample")
};

class ResidualBlock : public Layer {
 public:
  ResidualBlock(Context& ctx, std::string name);

  const char* kind() const override { return "block"; }
  bool composite() const override { return true; }

  template <typename L, typename... Args>
  L& add_branch(const std::string& child, Args&&... args) {
    return add_child<L>(branch_, child, std::forward<Args>(args)...);
  }
  template <typename L, typename... Args>
  L& add_shortcut(const std::string& child, Args&&... args) {
    return add_child<L>(shortcut_, child, std::forward<Args>(args)...);
  }

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;
  void init_parameters(std::mt19937_64& rng) override;
  void set_needs_input_grad(bool value) override;
  bool has_parameters() const override;
  // Unfused blocks end in their ReLU; the gradient sum at the input takes the ReLU gate of the
  // block before (Layer::set_input_grad_relu_gated) where the device's Add can.
  bool ends_in_relu() const override { return fused_ == nullptr; }
  bool set_input_grad_relu_gated(bool gated) override;
  void set_output_grad_relu_gated(bool gated) override { output_grad_gated_ = gated; }

 private:
  template <typename L, typename... Args>
  L& add_child(std::vector<std::unique_ptr<Layer>>& chain, const std::string& child,
               Args&&... args) {
    std::unique_ptr<L> layer = L::create(ctx_, name_ + "." + child, std::forward<Args>(args)...);
    L& ref = *layer;
    chain.push_back(std::move(layer));
    return ref;
  }

  // model.batchnorm: folded: asks each BatchNorm between two convolutions of the branch, and
  // counts the answers in Context::batchnorm_folding.
  void fold_batchnorms();
  // model.grad_sum: fused: asks the branch's first convolution to add the shortcut's input
  // gradient to its own in its pass (Conv2d::add_to_input_grad), counted in Context::grad_sum_fusion.
  void fuse_grad_sum();
  // The same for the branch's last BatchNorm, its sum fused (fused_), after the layer before it,
  // and then a projection shortcut's BatchNorm into that one.
  void fold_residual_batchnorm();
  const TensorRef& forward_fused(const TensorRef& src);
  const TensorRef& backward_fused(const TensorRef& diff_dst);
  // d(x) = d(branch input) + d(shortcut input), gated by ReLU'(x) when asked.
  const TensorRef& sum_input_grads(const TensorRef& db, const TensorRef& ds);
  GradientPlan::Buffer* plan_sum_input_grads(GradientPlan& plan, GradientPlan::Buffer* db, GradientPlan::Buffer* ds);

  std::vector<std::unique_ptr<Layer>> branch_, shortcut_;  // empty shortcut: identity
  BatchNorm2d* fused_ = nullptr;  // the branch's last layer when it fuses the sum and ReLU
  std::unique_ptr<Add> add_;
  std::unique_ptr<ReLU> relu_;
  std::unique_ptr<Add> sum_grads_;  // d(x) = d(branch input) + d(shortcut input)
  bool relu_fused_ = false;         // the sum writes relu(sum) (Add::set_relu_fused)
  bool grad_sum_fused_ = false;     // d(x) summed in the branch's first convolution's pass (fuse_grad_sum)
  bool input_grad_gated_ = false;   // d(x) gated by ReLU'(x): x is the last block's ReLU output
  bool output_grad_gated_ = false;  // the next block gated our output's gradient: no ReLU backward
  const TensorRef* input_ = nullptr;  // x of the last forward (the gate): the last layer's output
  GradientPlan::Buffer* planned_input_ = nullptr;
  std::string add_name_, sum_grads_name_;  // the adds' names in a LayerProfile
  const TensorRef empty_;
};

std::unique_ptr<ResidualBlock> make_basic_block(Context& ctx, const std::string& name,
                                                int in_channels, int planes, int stride,
                                                ShortcutKind shortcut,
                                                bool zero_init_residual = false);
// zero_init_residual: the branch's last BatchNorm starts with gamma 0, so the block starts
// as its shortcut.
std::unique_ptr<ResidualBlock> make_bottleneck_block(Context& ctx, const std::string& name,
                                                     int in_channels, int planes, int stride,
                                                     bool zero_init_residual = false);

}  // namespace sdp::nn
