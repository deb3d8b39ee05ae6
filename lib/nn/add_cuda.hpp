// AddCuda: Add as our own kernel (elementwise_rule.hpp). Operands in plain or channels_last;
// b is converted to a's layout when they differ, and backward_b converts the gradient back.
// Every AddOutput mode works; kInPlace writes over a. A block's ReLU folds into the sum
// (set_relu_fused) and a gradient sum takes a ReLU's gate (forward_gated): the very kernels of
// ReLUCuda's, applied to the rounded sum in the same pass. The sum (an activation's or a
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
  bool set_relu_fused(bool fused) override {
    relu_fused_ = fused;
    return true;
  }
  bool gates_by_relu_output() const override { return true; }
  const TensorRef& forward_gated(const TensorRef& a, const TensorRef& b, const TensorRef& relu_output) override;
  const TensorRef& backward_b(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward_b(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* a,
                                     GradientPlan::Buffer* b) override;

 private:
  Context& ctx_;
  // Launches the sum kernel (SumOp in add_cuda.cu) over a, b (in a's layout) and the gate.
  const TensorRef& sum(const TensorRef& a, const TensorRef& b, const void* gate);

  AddOutput output_ = AddOutput::kActivation;
  bool relu_fused_ = false;
  CudaLayoutAdapter b_to_a_, diff_b_;
  PlannedCudaBuffer dst_;
  TensorRef out_, diff_b_out_;
};

}  // namespace sdp::nn
