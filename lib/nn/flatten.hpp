// Flatten: [N, C, H, W] (any layout) -> [N, C*H*W] in PyTorch's C, H, W order. A view when
// the input is already plain; otherwise one reorder each way.
#pragma once

#include <memory>

#include "nn/layer.hpp"

namespace sdp::nn {

class Flatten : public Layer {
 public:
  const char* kind() const override { return "flatten"; }
  static std::unique_ptr<Flatten> create(Context& ctx, std::string name);

 protected:
  Flatten(Context& ctx, std::string name) : Layer(ctx, std::move(name)) {}
};

}  // namespace sdp::nn
