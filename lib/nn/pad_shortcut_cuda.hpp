// PadShortcutCuda: PadShortcut as kernels over pad_shortcut_rule.hpp's index math on plain
// NCHW (a channels_last input is converted to plain, and its gradient back), or on NHWC as it
// comes in a channels_last model (Context::channels_last).
#pragma once

#include "nn/context_cuda.hpp"
#include "nn/pad_shortcut.hpp"
#include "nn/pad_shortcut_rule.hpp"

namespace sdp::nn {

class PadShortcutCuda final : public PadShortcut {
 public:
  PadShortcutCuda(Context& ctx, std::string name, int in_channels, int out_channels, int stride);

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;

 private:
  PadShortcutGeometry geometry_{};
  bool training_ = false;
  CudaLayoutAdapter src_to_plain_, diff_to_src_;
  PlannedCudaBuffer dst_, diff_src_plain_;
  TensorDesc plain_src_;
  TensorRef out_, diff_src_, none_;
};

}  // namespace sdp::nn
