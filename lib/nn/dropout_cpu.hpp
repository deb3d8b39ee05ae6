// DropoutCpu: Dropout as a loop over the stored buffer (any oneDNN layout).
#pragma once

#include "nn/dropout.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn {

class DropoutCpu final : public OneDnnLayer<Dropout> {
 public:
  DropoutCpu(Context& ctx, std::string name, float p)
      : OneDnnLayer<Dropout>(ctx, std::move(name), p) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  memory dst_;
  PlannedMemory diff_src_;
};

}  // namespace sdp::nn
