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

 protected:
  ReLU(Context& ctx, std::string name) : Layer(ctx, std::move(name)) {}

  bool in_place_ = false;
};

}  // namespace sdp::nn
