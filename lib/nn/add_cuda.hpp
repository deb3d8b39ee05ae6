// AddCuda: Add as our own kernel (elementwise_rule.hpp). Operands in plain or channels_last;
// b is converted to a's layout when they differ, and backward_b converts the gradient back.
// Every AddOutput mode works; kInPlace writes over a. The sum (an activation's or a
// gradient's) and both conversions are planned when the model plans (Context::planned_backward).
#pragma once

#include "nn/add.hpp"
#include "nn/context_cuda.hpp"

namespace sdp::nn {

class AddCuda final : public Add {
 public:
  explicit AddCuda(Context& ctx) : ctx_(ctx) {}

  TensorDesc configure(const TensorDesc& a, const TensorDesc& b, AddOutput output) override;
  const TensorRef& forward(const TensorRef& a, const TensorRef& b) override;
  const TensorRef& backward_b(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward_b(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* a,
                                     GradientPlan::Buffer* b) override;

 private:
  Context& ctx_;
  AddOutput output_ = AddOutput::kActivation;
  CudaLayoutAdapter b_to_a_, diff_b_;
  PlannedCudaBuffer dst_;
  TensorRef out_, diff_b_out_;
};

}  // namespace sdp::nn
