// Add: y = a + b, the join of a residual connection (and the sum of the two input
// gradients of a block). Not a Layer (two inputs). The output takes a's layout (b is
// reordered when it differs); backward hands diff_dst to both inputs, converted to each
// input's own layout.
#pragma once

#include <memory>

#include "nn/context.hpp"

namespace sdp::nn {

class Add {
 public:
  static std::unique_ptr<Add> create(Context& ctx);
  virtual ~Add() = default;

  virtual TensorDesc configure(const TensorDesc& a, const TensorDesc& b) = 0;
  virtual const TensorRef& forward(const TensorRef& a, const TensorRef& b) = 0;
  // Gradient w.r.t. a (in a's layout) and w.r.t. b (in b's layout).
  const TensorRef& backward_a(const TensorRef& diff_dst) const { return diff_dst; }
  virtual const TensorRef& backward_b(const TensorRef& diff_dst) = 0;
};

}  // namespace sdp::nn
