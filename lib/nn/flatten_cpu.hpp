// FlattenCpu: Flatten over oneDNN reorders (to plain and back).
#pragma once

#include "nn/flatten.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn {

class FlattenCpu final : public OneDnnLayer<Flatten> {
 public:
  FlattenCpu(Context& ctx, std::string name) : OneDnnLayer<Flatten>(ctx, std::move(name)) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  LayoutAdapter to_plain_, from_plain_;
  memory::desc plain_src_md_, dst_md_;
  memory dst_, diff_src_plain_;
};

}  // namespace sdp::nn
