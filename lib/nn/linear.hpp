// Linear (fully connected): y = x W^T + b on oneDNN inner_product, x of shape [N, in].
// Weight [out, in] in PyTorch's layout in the arena; PyTorch's default initialization.
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

struct LinearOptions {
  int in_features = 0;
  int out_features = 0;
  bool bias = true;
};

class Linear : public Layer {
 public:
  Linear(Context& ctx, std::string name, const LinearOptions& options);

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;
  void init_parameters(std::mt19937_64& rng) override;

  Param& weight() { return *weight_; }
  Param* bias() { return bias_; }

 private:
  LinearOptions options_;
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  bool training_ = false;

  dnnl::inner_product_forward fwd_;
  dnnl::inner_product_backward_data bwd_data_;
  dnnl::inner_product_backward_weights bwd_weights_;
  memory dst_, diff_src_, weights_user_, diff_weights_user_, bias_user_, diff_bias_user_;
  memory diff_weights_, weights_fwd_mem_;
  dnnl::reorder diff_weights_reorder_;
  LayoutAdapter weights_fwd_, weights_bwd_, src_fwd_;
  memory src_;
};

}  // namespace sdp::nn
