// ReLUCuda: ReLU as our own kernels (elementwise_rule.hpp), backward from the output like
// the CPU twin. Any device-neutral layout (element-wise); output keeps the input's.
// No CUDA type here: relu.cpp includes it in every build, the definitions (relu_cuda.cu)
// exist only with SDP_HAVE_CUDA.
#pragma once

#include "nn/context_cuda.hpp"
#include "nn/relu.hpp"

namespace sdp::nn {

class ReLUCuda final : public ReLU {
 public:
  ReLUCuda(Context& ctx, std::string name);

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& forward_applied(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  // Reads diff_dst; the input gradient is this layer's own buffer (nullptr to the plan).
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;

 private:
  bool training_ = false;
  bool configured_in_place_ = false;
  PlannedCudaBuffer dst_, diff_src_buffer_;
  SavedForward saved_;
  TensorRef out_, diff_src_, none_;
};

}  // namespace sdp::nn
