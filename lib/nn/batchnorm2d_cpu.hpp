// BatchNorm2dCpu: BatchNorm2d on oneDNN batch_normalization (ReLU fused when asked).
#pragma once

#include "nn/batchnorm2d.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn {

class BatchNorm2dCpu final : public OneDnnLayer<BatchNorm2d> {
 public:
  BatchNorm2dCpu(Context& ctx, std::string name, const BatchNorm2dOptions& options)
      : OneDnnLayer<BatchNorm2d>(ctx, std::move(name), options) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  bool training_ = false;
  int64_t reduce_count_ = 0;  // N*H*W, for the unbiased running variance
  dnnl::batch_normalization_forward fwd_;
  dnnl::batch_normalization_backward bwd_;
  memory dst_, mean_, var_, workspace_;
  PlannedMemory diff_src_;
  memory scale_, shift_, diff_scale_, diff_shift_, running_mean_mem_, running_var_mem_;
  memory src_;
};

}  // namespace sdp::nn
