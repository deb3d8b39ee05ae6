// ReLU: y = max(x, 0); output and gradients keep the input's layout.
#pragma once

#include <memory>

#include "nn/layer.hpp"

namespace sdp::nn {

class ReLU : public Layer {
 public:
  const char* kind() const override { return "relu"; }
  static std::unique_ptr<ReLU> create(Context& ctx, std::string name);
  // In place: forward overwrites its input (backward needs only the output). For an input
  // that nobody reads after this layer; takes effect at the next configure.
  void set_in_place(bool in_place) { in_place_ = in_place; }
  // In place, the ReLU already applied to `src` by its producer (Add::set_relu_fused): takes
  // src as this layer's output, for backward, without a pass of its own. Layers that keep
  // more than their output run forward (the default).
  virtual const TensorRef& forward_applied(const TensorRef& src) { return run_forward(src); }

 protected:
  ReLU(Context& ctx, std::string name) : Layer(ctx, std::move(name)) {}

  bool in_place_ = false;
};

}  // namespace sdp::nn
