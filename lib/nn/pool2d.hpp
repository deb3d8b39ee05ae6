// Pooling layers on oneDNN: MaxPool2d, AvgPool2d (count_include_pad like PyTorch) and
// GlobalAvgPool2d (adaptive average pooling to 1x1, whatever the input size).
// Output sizes follow PyTorch's floor mode: (H + 2p - k) / s + 1.
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

enum class PoolKind { kMax, kAvg, kGlobalAvg };

struct Pool2dOptions {
  PoolKind kind = PoolKind::kMax;
  int kernel = 2;  // ignored by kGlobalAvg
  int stride = 2;
  int padding = 0;
};

class Pool2d : public Layer {
 public:
  Pool2d(Context& ctx, std::string name, const Pool2dOptions& options)
      : Layer(ctx, std::move(name)), options_(options) {}

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;

 private:
  Pool2dOptions options_;
  bool training_ = false;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  memory dst_, diff_src_, workspace_;
};

inline Pool2dOptions max_pool(int kernel, int stride, int padding = 0) {
  return {PoolKind::kMax, kernel, stride, padding};
}
inline Pool2dOptions avg_pool(int kernel, int stride, int padding = 0) {
  return {PoolKind::kAvg, kernel, stride, padding};
}
inline Pool2dOptions global_avg_pool() {
  return {PoolKind::kGlobalAvg, 0, 1, 0};
}

}  // namespace sdp::nn
