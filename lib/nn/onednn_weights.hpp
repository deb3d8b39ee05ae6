// OneDnnWeights: the weight (and bias) handling that Conv2dCpu and LinearCpu share. The
// arena holds weights and their gradients in PyTorch's plain layout; oneDNN primitives may
// want blocked layouts. This reorders weights in (once per forward, reused by backward-data
// when both want the same layout) and weight gradients back into the arena, and re-reads the
// arena pointers every step because the store may rebind its gradient arena.
#pragma once

#include <unordered_map>

#include "core/parameter_store.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn {

using ArgMap = std::unordered_map<int, memory>;

class OneDnnWeights {
 public:
  // Call in configure: the forward primitive's weight layout, then (training only) the
  // backward-weights primitive's gradient layout and, when the input gradient is needed,
  // the backward-data primitive's weight layout.
  void configure_forward(Param& weight, Param* bias, const memory::desc& fwd_weights_md);
  void configure_backward_weights(const memory::desc& diff_weights_md);
  void configure_backward_data(const memory::desc& bwd_weights_md);

  // Runs the forward primitive on SRC, DST and the weights (WEIGHTS, and BIAS when set).
  void execute_forward(dnnl::stream& stream, const dnnl::primitive& forward, const memory& src,
                       const memory& dst);
  // DIFF_WEIGHTS (and DIFF_BIAS) for the backward-weights primitive; after it ran,
  // finish_backward_weights() moves the gradient into the arena when layouts differ.
  void add_backward_weights_args(ArgMap& args);
  void finish_backward_weights(dnnl::stream& stream);
  // WEIGHTS for the backward-data primitive (after a forward of the same step).
  const memory& backward_data_weights(dnnl::stream& stream);
  // Declares the backward temporaries (the weight gradient in the primitive's layout, the
  // weights reordered for backward-data) in the owner's backward operation.
  void plan_backward(GradientPlan& plan);

 private:
  Param* weight_ = nullptr;
  Param* bias_ = nullptr;
  memory weights_user_, bias_user_, diff_weights_user_, diff_bias_user_;
  memory weights_fwd_mem_;  // weights in the forward primitive's layout (this step)
  // The primitive-layout weight gradient when it differs from the arena's (else the arena's
  // user memory is written directly): a temporary of backward, moved to the arena at once.
  PlannedMemory diff_weights_tmp_;
  dnnl::reorder diff_weights_reorder_;
  LayoutAdapter weights_fwd_, weights_bwd_;
};

}  // namespace sdp::nn
