// Add: y = a + b, the join of a residual connection (and the sum of the two input
// gradients of a block). Not a Layer (two inputs). The output takes a's layout (b is
// reordered when it differs); backward hands diff_dst to both inputs, converted to each
// input's own layout.
#pragma once

#include <memory>

#include "nn/context.hpp"
#include "nn/gradient_plan.hpp"

namespace sdp::nn {

// What an Add's output is: an activation (allocated at configure, kept until backward) or a
// sum of gradients inside backward (placed by the GradientPlan, see plan_forward).
enum class AddOutput { kActivation, kGradient };

class Add {
 public:
  static std::unique_ptr<Add> create(Context& ctx, AddOutput output = AddOutput::kActivation);
  virtual ~Add() = default;

  virtual TensorDesc configure(const TensorDesc& a, const TensorDesc& b) = 0;
  virtual const TensorRef& forward(const TensorRef& a, const TensorRef& b) = 0;
  // Gradient w.r.t. a (in a's layout) and w.r.t. b (in b's layout).
  const TensorRef& backward_a(const TensorRef& diff_dst) const { return diff_dst; }
  virtual const TensorRef& backward_b(const TensorRef& diff_dst) = 0;

  // GradientPlan declarations (nn/gradient_plan.hpp), one operation each: backward_b, and the
  // forward of a kGradient add. Each returns the planned buffer of its result.
  virtual GradientPlan::Buffer* plan_backward_b(GradientPlan& plan,
                                                GradientPlan::Buffer* diff_dst) = 0;
  virtual GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* a,
                                             GradientPlan::Buffer* b) = 0;
};

}  // namespace sdp::nn
