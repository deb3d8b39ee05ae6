// BatchNorm2d with PyTorch semantics. Training: normalize with the batch statistics
// (biased variance) and update the running averages with `momentum` (running_var gets the
// unbiased variance). Inference: normalize with the running statistics.
// Parameters weight (gamma) and bias (beta) have no weight decay; running_mean and
// running_var are buffers. With fuse_relu the output is relu(bn(x)) in one oneDNN pass.
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

struct BatchNorm2dOptions {
  int channels = 0;
  float eps = 1e-5f;
  float momentum = 0.1f;
  bool fuse_relu = false;
};

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(Context& ctx, std::string name, const BatchNorm2dOptions& options);

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;
  void init_parameters(std::mt19937_64& rng) override;

  Param& weight() { return *weight_; }
  Param& bias() { return *bias_; }
  Buffer& running_mean() { return *running_mean_; }
  Buffer& running_var() { return *running_var_; }

 private:
  BatchNorm2dOptions options_;
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  Buffer* running_mean_ = nullptr;
  Buffer* running_var_ = nullptr;
  bool training_ = false;
  int64_t reduce_count_ = 0;  // N*H*W, for the unbiased running variance

  dnnl::batch_normalization_forward fwd_;
  dnnl::batch_normalization_backward bwd_;
  memory dst_, diff_src_, mean_, var_, workspace_;
  memory scale_, shift_, diff_scale_, diff_shift_, running_mean_mem_, running_var_mem_;
  memory src_;
};

}  // namespace sdp::nn
