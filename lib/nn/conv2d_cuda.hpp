// Conv2dCuda: Conv2d on cuDNN's legacy convolution API over the arena's OIHW weight (NCHW f32:
// no copy of it). Activations computed in plain NCHW: a channels_last input is converted on
// the way in (and its gradient on the way out); with channels_last the output is NHWC, as on
// the CPU. Algorithms are chosen once per input shape and Context::rules (by default
// cudnnGet*Algorithm_v7's first deterministic one that runs in f32 FMA math, i.e. no TF32;
// rules may allow TF32, any algorithm, and cuDNN's timing them: cudnnFind*) and cached; the
// stream's shared workspace is grown at configure. Bias by cudnnAddTensor / cudnnConvolutionBackwardBias;
// a fused ReLU by our kernel on the output, its derivative from that output.
// Native channels_last (Context::channels_last, NHWC input): x, y and their gradients stay
// NHWC and the filter is an OHWI copy in the compute dtype (what cuDNN's NHWC tensor-core
// kernels read; f32 too, for TF32), its gradient widened back into the arena's OIHW; no
// activation conversion runs.
// Folded BatchNorms (BatchNorm2dCuda::fold_between, model.batchnorm: folded): the forward
// computes the next BatchNorm's statistics in its epilogue, and/or applies the BatchNorm before
// it (with its ReLU) as it loads its input, whose filter gradient then recomputes that input and
// whose input gradient goes through the ReLU with the BatchNorm's weight gradients: each pass
// one cuDNN frontend graph (cudnn_fusion_cuda.hpp) instead of the legacy call. With
// add_to_input_grad (model.grad_sum: fused), the input gradient pass is a frontend graph too,
// which adds the residual block's other term in its epilogue.
// Backward as the CPU twin: weight (and bias) gradients overwritten and reported first.
// The cuDNN state lives behind Impl (conv2d_cuda.cpp) so this header has no CUDA type.
#pragma once

#include <memory>
#include <string>

#include "nn/batchnorm2d_cuda.hpp"
#include "nn/context_cuda.hpp"
#include "nn/conv2d.hpp"

namespace sdp::nn {
namespace cuda {
struct FusedConvShape;
}  // namespace cuda

class Conv2dCuda final : public Conv2d {
 public:
  Conv2dCuda(Context& ctx, std::string name, const Conv2dOptions& options);
  ~Conv2dCuda() override;

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;

  // BatchNorm folding (the BatchNorm asks; see the header comment): "" when this convolution's
  // folded passes built, otherwise why not, and nothing changed.
  std::string fold_statistics_of(BatchNorm2dCuda& bn);
  std::string fold_input_batchnorm(BatchNorm2dCuda& bn);
  void unfold_statistics();
  std::string add_to_input_grad() override;
  void set_input_grad_addend(const TensorRef& addend) override { input_grad_addend_ = addend.data; }
  void set_planned_input_grad_addend(GradientPlan::Buffer* addend) override { planned_addend_ = addend; }

 private:
  struct Impl;
  bool uses_weight_copy() const;
  // Builds the folded passes the current folds need (cached per stream); "" or the first refusal.
  std::string build_folded_passes();
  std::string try_fold(BatchNorm2dCuda*& slot, BatchNorm2dCuda& bn);
  cuda::FusedConvShape fused_shape() const;

  std::unique_ptr<Impl> impl_;
  bool training_ = false;
  bool native_nhwc_ = false;  // computes on NHWC as it comes (see the header comment)
  TensorDesc plain_src_, plain_dst_;
  CudaLayoutAdapter src_to_plain_, dst_out_, diff_dst_to_plain_, diff_src_out_;
  PlannedCudaBuffer dst_plain_, diff_pre_relu_, diff_src_plain_;
  SavedForward saved_;
  const void* x_plain_ = nullptr;  // the plain input of the last forward (weight gradient)
  BatchNorm2dCuda* statistics_of_ = nullptr;  // the BatchNorm after, whose statistics forward sums
  BatchNorm2dCuda* input_batchnorm_ = nullptr;  // the BatchNorm before, applied as forward loads
  bool adds_to_input_grad_ = false;  // add_to_input_grad said yes since the last configure
  const void* input_grad_addend_ = nullptr;
  GradientPlan::Buffer* planned_addend_ = nullptr;
  TensorRef out_, diff_src_, none_;
};

// train.conv_algorithms: measured: the algorithms the convolutions on ctx's stream timed, as
// conv_algorithm_choices.hpp's text ("" when none were), and choices to use instead of timing
// again (rank 0's, a checkpoint's): "" once taken, or why not (measured with another cuDNN or
// GPU). Malformed text is an InputError naming `what`.
std::string export_measured_conv_algorithms(Context& ctx);
std::string import_measured_conv_algorithms(Context& ctx, const std::string& text, const std::string& what);

}  // namespace sdp::nn
