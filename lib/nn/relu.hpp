// ReLU on oneDNN eltwise; output and gradients keep the input's layout.
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

class ReLU : public Layer {
 public:
  ReLU(Context& ctx, std::string name) : Layer(ctx, std::move(name)) {}

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;

 private:
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  memory dst_, diff_src_;
};

}  // namespace sdp::nn
