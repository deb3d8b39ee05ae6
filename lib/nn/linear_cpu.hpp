// LinearCpu: Linear on oneDNN inner_product (weights reordered to the primitive's layout
// when it wants another one).
#pragma once

#include "nn/linear.hpp"
#include "nn/onednn.hpp"
#include "nn/onednn_weights.hpp"

namespace sdp::nn {

class LinearCpu final : public OneDnnLayer<Linear> {
 public:
  LinearCpu(Context& ctx, std::string name, const LinearOptions& options)
      : OneDnnLayer<Linear>(ctx, std::move(name), options) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  bool training_ = false;
  dnnl::inner_product_forward fwd_;
  dnnl::inner_product_backward_data bwd_data_;
  dnnl::inner_product_backward_weights bwd_weights_;
  memory dst_;
  PlannedMemory diff_src_;
  OneDnnWeights weights_;
  LayoutAdapter src_fwd_;
  memory src_;
};

}  // namespace sdp::nn
