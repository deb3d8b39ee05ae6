// Pooling layers on oneDNN: MaxPool2d, AvgPool2d (count_include_pad like PyTorch) and
// GlobalAvgPool2d (adaptive average pooling to 1x1, whatever the input size).
// Output sizes follow PyTorch's floor mode: (H + 2p - k) / s + 1.
// With fuse_relu (max pooling only) the output is relu(maxpool(x)), which equals
// maxpool(relu(x)): conv -> maxpool+ReLU computes conv -> ReLU -> maxpool with the ReLU,
// forward and backward, on the pooled tensor (in place on the output).
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

enum class PoolKind { kMax, kAvg, kGlobalAvg };

struct Pool2dOptions {
  PoolKind kind = PoolKind::kMax;
  int kernel = 2;  // ignored by kGlobalAvg
  int stride = 2;
  int padding = 0;
  bool fuse_relu = false;  // kMax only
};

class Pool2d : public Layer {
 public:
  Pool2d(Context& ctx, std::string name, const Pool2dOptions& options);

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;

 private:
  Pool2dOptions options_;
  bool training_ = false;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  dnnl::eltwise_forward relu_fwd_;  // fuse_relu
  dnnl::eltwise_backward relu_bwd_;
  memory dst_, diff_src_, workspace_, diff_pre_relu_;
};

inline Pool2dOptions max_pool(int kernel, int stride, int padding = 0, bool fuse_relu = false) {
  return {PoolKind::kMax, kernel, stride, padding, fuse_relu};
}
inline Pool2dOptions avg_pool(int kernel, int stride, int padding = 0) {
  return {PoolKind::kAvg, kernel, stride, padding, false};
}
inline Pool2dOptions global_avg_pool() {
  return {PoolKind::kGlobalAvg, 0, 1, 0, false};
}

}  // namespace sdp::nn
