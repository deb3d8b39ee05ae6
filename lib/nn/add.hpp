// Add: y = a + b, the join of a residual connection. Not a Layer (two inputs). The output
// takes a's layout (b is reordered when it differs); backward hands diff_dst to both
// inputs, converted to each input's own layout.
#pragma once

#include "nn/context.hpp"

namespace sdp::nn {

class Add {
 public:
  explicit Add(Context& ctx) : ctx_(ctx) {}

  memory::desc configure(const memory::desc& a_md, const memory::desc& b_md);
  const memory& forward(const memory& a, const memory& b);
  // Gradient w.r.t. a (in a's layout) and w.r.t. b (in b's layout).
  const memory& backward_a(const memory& diff_dst) const { return diff_dst; }
  const memory& backward_b(const memory& diff_dst) {
    return diff_b_.convert(ctx_.stream, diff_dst);
  }

 private:
  Context& ctx_;
  dnnl::binary add_;
  LayoutAdapter b_to_a_, diff_b_;
  memory dst_;
};

}  // namespace sdp::nn
