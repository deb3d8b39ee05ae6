// Pooling layers: MaxPool2d, AvgPool2d (count_include_pad like PyTorch) and
// GlobalAvgPool2d (adaptive average pooling to 1x1, whatever the input size).
// Output sizes follow PyTorch's floor mode: (H + 2p - k) / s + 1.
// With fuse_relu (max pooling only) the output is relu(maxpool(x)), which equals
// maxpool(relu(x)): conv -> maxpool+ReLU computes conv -> ReLU -> maxpool with the ReLU,
// forward and backward, on the pooled tensor (in place on the output).
// Non-overlapping max pooling (kernel == stride, no padding) on a dense NCHW, NHWC or
// blocked input runs hand-written loops on the CPU (nn/direct_max_pool.hpp); the rest is oneDNN.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/layer.hpp"

namespace sdp::nn {

enum class PoolKind { kMax, kAvg, kGlobalAvg };

struct Pool2dOptions {
  PoolKind kind = PoolKind::kMax;
  int kernel = 2;  // ignored by kGlobalAvg
  int stride = 2;
  int padding = 0;
  bool fuse_relu = false;  // kMax only
  // Output in NHWC whatever the input layout (for a next layer that wants it, e.g. a
  // channels_last convolution); otherwise the direct path keeps the input's layout and
  // oneDNN picks its own.
  bool channels_last = false;
};

class Pool2d : public Layer {
 public:
  const char* kind() const override { return "pool"; }
  static std::unique_ptr<Pool2d> create(Context& ctx, std::string name, const Pool2dOptions& options);

  const Pool2dOptions& options() const { return options_; }

 protected:
  Pool2d(Context& ctx, std::string name, const Pool2dOptions& options);

  Pool2dOptions options_;
};

inline Pool2dOptions max_pool(int kernel, int stride, int padding = 0, bool fuse_relu = false,
                              bool channels_last = false) {
  return {PoolKind::kMax, kernel, stride, padding, fuse_relu, channels_last};
}
inline Pool2dOptions avg_pool(int kernel, int stride, int padding = 0) {
  return {PoolKind::kAvg, kernel, stride, padding, false, false};
}
inline Pool2dOptions global_avg_pool() {
  return {PoolKind::kGlobalAvg, 0, 1, 0, false, false};
}

}  // namespace sdp::nn
