// DropoutCuda: the CPU twin's masks bit for bit. Dropout::draw_mask draws them on the host
// from the same std::mt19937_64 position (the generator is sequential; a counter-based one
// such as Philox would let the GPU draw its own, but would change the CPU's masks), the
// mask is copied to the device on the layer's stream, and a kernel applies
// dropout_rule.hpp's product forward and backward. Any device-neutral layout.
#pragma once

#include "nn/context_cuda.hpp"
#include "nn/dropout.hpp"

namespace sdp::nn {

class DropoutCuda final : public Dropout {
 public:
  DropoutCuda(Context& ctx, std::string name, float p);

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  // The identity (inference, p = 0) hands diff_dst through; otherwise its own buffer.
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;

 private:
  bool active() const { return training_ && p_ > 0.0f; }

  CudaBuffer mask_device_;
  PlannedCudaBuffer dst_, diff_src_buffer_;
  TensorRef out_, diff_src_, none_;
};

}  // namespace sdp::nn
