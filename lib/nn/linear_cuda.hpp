// LinearCuda: Linear on cuBLAS f32 GEMMs over the arena's row-major PyTorch weight [out, in]
// (no reordered copy), the bias and its gradient by small kernels (the bias gradient sums the
// batch in a fixed order: deterministic). Input and output plain [N, features].
// Backward as the CPU twin: weight (and bias) gradients first, overwritten, reported to the
// grad-ready hook, then the input gradient.
#pragma once

#include "nn/context_cuda.hpp"
#include "nn/linear.hpp"

namespace sdp::nn {

class LinearCuda final : public Linear {
 public:
  LinearCuda(Context& ctx, std::string name, const LinearOptions& options);

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  // Reads diff_dst; the input gradient is this layer's own buffer (nullptr to the plan).
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;

 private:
  // The weights as forward's GEMM reads them: the f32 parameter, or its cast into weight_lp_
  // under mixed precision.
  const void* weight_values();

  bool training_ = false;
  int64_t batch_ = 0;
  CudaBuffer weight_lp_;
  PlannedCudaBuffer dst_, diff_src_buffer_;
  SavedForward saved_;
  TensorRef src_, out_, diff_src_, none_;
};

}  // namespace sdp::nn
