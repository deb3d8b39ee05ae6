// PadShortcutCpu: PadShortcut as a loop on plain NCHW (inputs in other layouts reordered).
#pragma once

#include "nn/onednn.hpp"
#include "nn/pad_shortcut.hpp"

namespace sdp::nn {

class PadShortcutCpu final : public OneDnnLayer<PadShortcut> {
 public:
  PadShortcutCpu(Context& ctx, std::string name, int in_channels, int out_channels, int stride)
      : OneDnnLayer<PadShortcut>(ctx, std::move(name), in_channels, out_channels, stride) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  Dims in_dims_, out_dims_;
  LayoutAdapter src_to_plain_, diff_to_src_;
  memory dst_;
  PlannedMemory diff_src_plain_;
};

}  // namespace sdp::nn
