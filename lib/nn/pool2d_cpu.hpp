// Pool2dCpu: Pool2d on oneDNN pooling, or on the hand-written non-overlapping max pool.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "nn/direct_max_pool.hpp"
#include "nn/onednn.hpp"
#include "nn/pool2d.hpp"

namespace sdp::nn {

class Pool2dCpu final : public OneDnnLayer<Pool2d> {
 public:
  Pool2dCpu(Context& ctx, std::string name, const Pool2dOptions& options)
      : OneDnnLayer<Pool2d>(ctx, std::move(name), options) {}

 protected:
  memory::desc configure_md(const memory::desc& src_md, bool training) override;
  const memory& forward_md(const memory& src) override;
  const memory& backward_md(const memory& diff_dst) override;
  GradientPlan::Buffer* plan_backward_md(GradientPlan& plan,
                                         GradientPlan::Buffer* diff_dst) override;

 private:
  memory::desc configure_direct(const memory::desc& src_md, const ActivationLayout& src_layout,
                                const Dims& out, bool training);
  bool training_ = false;
  std::optional<DirectMaxPool> direct_;  // the hand-written path (see pool2d.hpp)
  std::vector<uint8_t> argmax_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  dnnl::eltwise_forward relu_fwd_;  // fuse_relu
  dnnl::eltwise_backward relu_bwd_;
  memory dst_, workspace_;
  PlannedMemory diff_src_, diff_pre_relu_;
  // The direct kernels write only the window maxima: their gradient buffer is this layer's
  // own, zeroed once (never shared: other buffers would leave garbage in the rest).
  memory direct_diff_src_;
};

}  // namespace sdp::nn
