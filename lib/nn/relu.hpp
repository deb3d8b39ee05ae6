// ReLU: y = max(x, 0); output and gradients keep the input's layout.
#pragma once

#include <memory>

#include "nn/layer.hpp"

namespace sdp::nn {

class ReLU : public Layer {
 public:
  static std::unique_ptr<ReLU> create(Context& ctx, std::string name);

 protected:
  ReLU(Context& ctx, std::string name) : Layer(ctx, std::move(name)) {}
};

}  // namespace sdp::nn
