// ReLUCpu: ReLU on oneDNN eltwise (backward from the output).
#pragma once

#include "nn/onednn.hpp"
#include "nn/relu.hpp"

namespace sdp::nn {

class ReLUCpu final : public OneDnnLayer<ReLU> {
 public:
  ReLUCpu(Context& ctx, std::string name) : OneDnnLayer<ReLU>(ctx, std::move(name)) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  memory dst_;  // in place: the input of the last forward
  PlannedMemory diff_src_;
};

}  // namespace sdp::nn
