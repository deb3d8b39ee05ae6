// Add: y = a + b, the join of a residual connection (and the sum of the two input
// gradients of a block). Not a Layer (two inputs). The output takes a's layout (b is
// reordered when it differs); backward hands diff_dst to both inputs, converted to each
// input's own layout.
#pragma once

#include <memory>

#include "nn/context.hpp"
#include "nn/gradient_plan.hpp"

namespace sdp::nn {

// Where an Add's output goes.
enum class AddOutput {
  kActivation,  // its own buffer, allocated at configure and kept until backward
  kInPlace,     // over a: for an a whose producer's backward does not read it and that
                // nobody else reads (a residual branch's last output)
  kGradient,    // a sum of gradients inside backward, placed by the GradientPlan
};

class Add {
 public:
  static std::unique_ptr<Add> create(Context& ctx);
  virtual ~Add() = default;

  virtual TensorDesc configure(const TensorDesc& a, const TensorDesc& b,
                               AddOutput output = AddOutput::kActivation) = 0;
  virtual const TensorRef& forward(const TensorRef& a, const TensorRef& b) = 0;

  // Folding a residual block's ReLU into the pass over memory the sum makes anyway (one pass
  // where two ran), bit for bit what the separate ReLU gives. Devices whose Add cannot keep
  // the defaults (false), and the block runs its ReLU.
  // forward writes relu(a + b) from the next configure on; returns whether it will.
  virtual bool set_relu_fused(bool /*fused*/) { return false; }
  // A gradient sum gated by a ReLU's derivative: (a + b) where `relu_output` > 0, else 0
  // (kGradient: the sum of a block's input gradients, gated by the ReLU that produced its
  // input). Only where gates_by_relu_output().
  virtual bool gates_by_relu_output() const { return false; }
  virtual const TensorRef& forward_gated(const TensorRef& a, const TensorRef& b, const TensorRef& relu_output);
  // Gradient w.r.t. a (in a's layout) and w.r.t. b (in b's layout).
  const TensorRef& backward_a(const TensorRef& diff_dst) const { return diff_dst; }
  virtual const TensorRef& backward_b(const TensorRef& diff_dst) = 0;

  // GradientPlan declarations (nn/gradient_plan.hpp), one operation each: backward_b, and
  // forward (a kGradient sum in backward, or an activation's in forward). Each returns the
  // planned buffer of its result (a itself in place; nullptr: this object's own).
  virtual GradientPlan::Buffer* plan_backward_b(GradientPlan& plan,
                                                GradientPlan::Buffer* diff_dst) = 0;
  virtual GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* a,
                                             GradientPlan::Buffer* b) = 0;
};

}  // namespace sdp::nn
