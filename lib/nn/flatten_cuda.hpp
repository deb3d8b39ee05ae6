// FlattenCuda: a view of a plain input as [N, C*H*W] (no kernel); a channels_last input is
// converted to plain first, and the gradient back.
#pragma once

#include "nn/context_cuda.hpp"
#include "nn/flatten.hpp"

namespace sdp::nn {

class FlattenCuda final : public Flatten {
 public:
  FlattenCuda(Context& ctx, std::string name);

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  // A view hands diff_dst through; a conversion back writes this layer's own buffer.
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;

 private:
  CudaLayoutAdapter to_plain_, from_plain_;
  TensorDesc plain_src_;
  TensorRef out_, diff_src_, none_;
};

}  // namespace sdp::nn
