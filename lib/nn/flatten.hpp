// Flatten: [N, C, H, W] (any layout) -> [N, C*H*W] in PyTorch's C, H, W order. A view when
// the input is already plain; otherwise one reorder each way.
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

class Flatten : public Layer {
 public:
  Flatten(Context& ctx, std::string name) : Layer(ctx, std::move(name)) {}

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;

 private:
  LayoutAdapter to_plain_, from_plain_;
  memory::desc plain_src_md_, dst_md_;
  memory dst_, diff_src_plain_;
};

}  // namespace sdp::nn
