// BatchNorm2d with PyTorch semantics. Training: normalize with the batch statistics
// (biased variance) and update the running averages with `momentum` (running_var gets the
// unbiased variance). Inference: normalize with the running statistics.
// Parameters weight (gamma) and bias (beta) have no weight decay; running_mean and
// running_var are buffers. With fuse_relu the output is relu(bn(x)) in one pass.
#pragma once

#include <memory>

#include "nn/layer.hpp"

namespace sdp::nn {

struct BatchNorm2dOptions {
  int channels = 0;
  float eps = 1e-5f;
  float momentum = 0.1f;
  bool fuse_relu = false;
  // 0 for the last BN of a residual branch (Goyal et al. 2017, §5.1): each block starts as
  // the identity, which trains large batches more stably.
  float gamma_init = 1.0f;
};

class BatchNorm2d : public Layer {
 public:
  const char* kind() const override { return "batchnorm"; }
  static std::unique_ptr<BatchNorm2d> create(Context& ctx, std::string name,
                                             const BatchNorm2dOptions& options);

  void init_parameters(std::mt19937_64& rng) override;
  // Batch-norm backward reads x, the batch statistics and (fused ReLU) a workspace, never y.
  bool backward_reads_output() const override { return false; }
  // Fuses the residual sum and its ReLU into this layer: y = relu(bn(x) + z), z the block's
  // shortcut output (in this layer's output layout), given before each forward with
  // set_residual. ResidualBlock asks after configure(); only a backend with the fused
  // operation says yes (cuDNN on NHWC 16-bit), and the question is asked again after every
  // configure. Once fused, backward leaves z's gradient in residual_grad() and does not report
  // its parameter gradients: the block reports them with report_grads_ready() after the
  // shortcut's, which keeps the reverse registration order.
  virtual bool fuse_residual_add_relu(const TensorDesc& /*shortcut*/) { return false; }
  virtual void set_residual(const TensorRef& /*z*/) {}
  // The planned buffer z will be in (plan_forward reads it; nullptr: not planned).
  virtual void set_planned_residual(GradientPlan::Buffer* /*z*/) {}
  virtual const TensorRef& residual_grad() const;
  // The planned buffer residual_grad() leaves in, as the last plan_backward declared it
  // (nullptr: the layer's own storage, or no sum fused).
  virtual GradientPlan::Buffer* planned_residual_grad() const { return nullptr; }
  void report_grads_ready() const { grads_ready(); }
  // Folds this BatchNorm and its ReLU into the convolutions around it (model.batchnorm: folded;
  // NVIDIA's "NormConvolution"): `before` computes its batch statistics in its forward's
  // epilogue, `after` applies it, relu(x * scale + bias), as it loads its input, and `after`'s
  // input gradient pass goes through the ReLU and sums this layer's weight gradients. Its output
  // is then never stored: forward returns its input, and the gradient backward is given is that
  // of its pre-activation. In evaluation `after` applies the running statistics and `before` sums
  // nothing. ResidualBlock asks after every configure; "" means folded, otherwise why not (only
  // cuDNN's graphs on NHWC 16-bit fold).
  virtual std::string fold_between(Layer& /*before*/, Layer& /*after*/) {
    return "BatchNorm folding is a GPU's (cuDNN graphs on NHWC 16-bit activations)";
  }
  // The branch's last BatchNorm, its block's sum and ReLU fused (fuse_residual_add_relu said yes),
  // folded after the convolution before it (model.batchnorm: folded; NVIDIA's MLPerf ResNet-50's
  // "scale-bias-add-ReLU" with "DBN add ReLU"): `before` computes its batch statistics in its
  // forward's epilogue, forward is then one pass, relu(x * scale + bias + z), which also writes
  // the ReLU's mask, one bit an element, and backward is cuDNN's batchnorm backward through that
  // mask, writing z's gradient too. Training only (evaluation's fused BatchNorm is already one
  // pass). ResidualBlock asks after every training configure; "" means folded, otherwise why not.
  virtual std::string fold_with_residual_after(Layer& /*before*/) {
    return "BatchNorm folding is a GPU's (cuDNN graphs on NHWC 16-bit activations)";
  }
  // A projection shortcut's BatchNorm folded into `last`, the branch's last BatchNorm folded with
  // the block's sum (NVIDIA's "dual scale-bias-add-ReLU"): `before`, the shortcut's convolution,
  // sums its statistics, its forward returns its input and `last`'s pass normalises that as it
  // reads it, its backward is cuDNN's batchnorm backward of z's gradient. Training only.
  // ResidualBlock asks after `last` folded; "" means folded, otherwise why not.
  virtual std::string fold_into_residual_of(Layer& /*before*/, BatchNorm2d& /*last*/) {
    return "BatchNorm folding is a GPU's (cuDNN graphs on NHWC 16-bit activations)";
  }
  Param& weight() { return *weight_; }
  Param& bias() { return *bias_; }
  Buffer& running_mean() { return *running_mean_; }
  Buffer& running_var() { return *running_var_; }

 protected:
  BatchNorm2d(Context& ctx, std::string name, const BatchNorm2dOptions& options);
  void check_input(const Shape& in) const;
  // Folds one training batch's statistics (mean, biased variance over reduce_count = N*H*W
  // values per channel) into the running buffers, on host memory.
  void update_running_stats_host(const float* batch_mean, const float* batch_var,
                                 int64_t reduce_count);

  BatchNorm2dOptions options_;
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  Buffer* running_mean_ = nullptr;
  Buffer* running_var_ = nullptr;
};

}  // namespace sdp::nn
