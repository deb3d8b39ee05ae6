// AddCpu: Add on oneDNN binary_add.
#pragma once

#include "nn/add.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn {

class AddCpu final : public Add {
 public:
  explicit AddCpu(Context& ctx) : ctx_(ctx) {}

  TensorDesc configure(const TensorDesc& a, const TensorDesc& b, AddOutput output) override;
  const TensorRef& forward(const TensorRef& a, const TensorRef& b) override;
  const TensorRef& backward_b(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward_b(GradientPlan& plan,
                                        GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* a,
                                     GradientPlan::Buffer* b) override;

 private:
  Context& ctx_;
  AddOutput output_ = AddOutput::kActivation;
  dnnl::binary add_;
  LayoutAdapter b_to_a_, diff_b_;
  OneDnnPort a_port_, b_port_, diff_port_;
  PlannedMemory dst_;
  TensorRef out_, diff_b_out_;
};

}  // namespace sdp::nn
