// Linear (fully connected): y = x W^T + b, x of shape [N, in]. Weight [out, in] in
// PyTorch's layout in the arena on every device; PyTorch's default initialization.
#pragma once

#include <memory>

#include "nn/layer.hpp"

namespace sdp::nn {

struct LinearOptions {
  int in_features = 0;
  int out_features = 0;
  bool bias = true;
};

class Linear : public Layer {
 public:
  const char* kind() const override { return "linear"; }
  static std::unique_ptr<Linear> create(Context& ctx, std::string name, const LinearOptions& options);

  void init_parameters(std::mt19937_64& rng) override;
  Param& weight() { return *weight_; }
  Param* bias() { return bias_; }

 protected:
  Linear(Context& ctx, std::string name, const LinearOptions& options);
  void check_input(const Shape& in) const;

  LinearOptions options_;
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
};

}  // namespace sdp::nn
