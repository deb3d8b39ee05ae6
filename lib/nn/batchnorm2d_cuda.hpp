// BatchNorm2dCuda: BatchNorm2d on cuDNN's spatial batch normalization (legacy API). Training
// normalizes with the batch statistics and folds them into the running buffers with the CPU
// twin's convention (running = (1 - momentum) running + momentum batch; the running variance
// unbiased, as cuDNN keeps it); inference uses the running statistics.
//  * NCHW (without channels_last): plain NCHW inside, channels_last converted at
//    the edges. A fused ReLU is our kernel, which also records where the output was positive:
//    backward_reads_output() is false, so a consumer may overwrite the output before backward
//    (ResidualBlock's in-place sum).
//  * Native channels_last (Context::channels_last, NHWC input): cuDNN's
//    cudnnBatchNormalizationForwardTrainingEx / BackwardEx in CUDNN_BATCHNORM_SPATIAL_PERSISTENT
//    mode (any dtype cuDNN takes: f16, and on cuDNN 9.19 bf16 and f32 too), the ReLU fused
//    (CUDNN_BATCHNORM_OPS_BN_ACTIVATION) and, at the end of a residual
//    block, the shortcut's sum too (CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION): one pass over the
//    activations where three ran. Its fused backward reads the output (the ReLU's gate), so
//    backward_reads_output() is true then. Which mode and operation a layer runs is what
//    cuDNN's size queries accept for its shape and dtype, best first. Inference is our kernel,
//    fused the same way.
// Parameter gradients overwritten (cuDNN's beta = 0) and reported before the input gradient
// is returned; cuDNN computes both in one call, as oneDNN does.
//  * Folded (fold_between, model.batchnorm: folded; NHWC f16/bf16, with its ReLU): in training
//    the convolution before writes each channel's sum and sum of squares (FoldState), forward
//    turns them into the batch statistics, the running statistics and the scale and bias the
//    convolution after applies as it loads (batchnorm_fold_cuda.hpp), and returns its input;
//    backward is given the pre-activation's gradient and this layer's weight gradients, both
//    from the convolution after's input gradient pass, and writes the input gradient in one
//    pass (nn/batchnorm_fold_rule.hpp). In evaluation forward makes the running statistics'
//    scale and bias, applied the same way.
//  * Folded with the block's sum (fold_with_residual_after, model.batchnorm: folded; the branch's
//    last BatchNorm, its sum and ReLU fused; NHWC f16/bf16, training): the convolution before
//    writes the sums, forward makes the statistics as above and writes relu(x * scale + bias + z)
//    with the ReLU's mask, one bit an element, in one pass (batchnorm_fold_cuda.hpp); backward is
//    cuDNN's batchnorm backward graph through that mask (cudnn_fusion_cuda.hpp), which writes z's
//    gradient too. It reads x and the mask, not the output. A projection shortcut's BatchNorm
//    folds into that pass (fold_into_residual_of): its statistics from the shortcut's convolution,
//    its forward the finalize alone (it returns its input, which the last BatchNorm's pass
//    normalises as it reads it), its backward cuDNN's batchnorm backward graph given z's gradient.
#pragma once

#include <memory>
#include <string>

#include "nn/batchnorm2d.hpp"
#include "nn/context_cuda.hpp"

namespace sdp::nn {
namespace cuda {
struct FoldedStatistics;
enum class FusedPass;
}  // namespace cuda

class BatchNorm2dCuda final : public BatchNorm2d {
 public:
  BatchNorm2dCuda(Context& ctx, std::string name, const BatchNorm2dOptions& options);
  ~BatchNorm2dCuda() override;

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;
  bool backward_reads_output() const override;
  // Whether the output stays alive until backward: when backward reads it, or whenever the
  // plan is not lean (Context::lean_plan; cuDNN's backward is then given it too).
  bool keeps_output_for_backward() const;
  bool fuse_residual_add_relu(const TensorDesc& shortcut) override;
  void set_residual(const TensorRef& z) override { residual_ = z.data; }
  void set_planned_residual(GradientPlan::Buffer* z) override { planned_residual_ = z; }
  const TensorRef& residual_grad() const override { return diff_residual_; }
  GradientPlan::Buffer* planned_residual_grad() const override { return planned_residual_grad_; }
  std::string fold_between(Layer& before, Layer& after) override;
  std::string fold_with_residual_after(Layer& before) override;
  std::string fold_into_residual_of(Layer& before, BatchNorm2d& last) override;
  bool folded() const { return folded_; }
  bool folded_with_residual() const { return residual_folded_; }

  // What the two convolutions of a fold share with this layer, per channel.
  struct FoldState {
    CudaBuffer sum, sq_sum;  // f32: the convolution before writes them in its forward
    CudaBuffer scale, bias;  // the io type: forward writes them, the convolution after applies them
    CudaBuffer dbn_coefficients;  // f32 [3, C]: cuDNN's dbn_weight's own (unused: the rule's are)
  };
  FoldState& fold_state() { return fold_; }
  // The batch's mean and inverse deviation of the last training forward (f32, per channel).
  const float* saved_mean() const { return save_mean_.as<const float>(); }
  const float* saved_inv_std() const { return save_inv_var_.as<const float>(); }
  int64_t channels() const { return options_.channels; }

 private:
  struct Impl;
  // Picks the cuDNN mode and operation (see the header comment) and sizes their buffers.
  void choose_fused_operation(bool with_residual);
  void forward_native();
  // The sums, scale and bias the folds share with the convolutions (FoldState, but its dbn part).
  void reserve_fold_state();
  void finalize_folded_statistics();
  cuda::FoldedStatistics folded_statistics() const;
  std::string residual_fold_obstacle(Layer& before) const;
  std::string fold_statistics_and_backward(Layer& before, cuda::FusedPass pass);
  void backward_native(const void* diff_dst, void* diff_src);

  std::unique_ptr<Impl> impl_;
  bool training_ = false;
  bool native_nhwc_ = false;
  bool residual_fused_ = false;
  bool folded_ = false;  // fold_between said yes since the last configure
  bool residual_folded_ = false;  // fold_with_residual_after said yes since the last configure
  bool shortcut_folded_ = false;  // fold_into_residual_of said yes since the last configure
  BatchNorm2dCuda* folded_shortcut_ = nullptr;  // residual_folded_: the shortcut's folded into our pass
  FoldState fold_;
  TensorDesc plain_src_;
  CudaLayoutAdapter src_to_plain_, diff_src_out_;
  CudaBuffer save_mean_, save_inv_var_, relu_mask_, reserve_;
  CudaBuffer relu_bits_;  // folded with the sum: the ReLU's mask, a bit an element
  PlannedCudaBuffer dst_, diff_pre_relu_, diff_src_plain_, diff_z_;
  SavedForward saved_;
  GradientPlan::Buffer* planned_residual_ = nullptr;  // z's buffer (plan_forward)
  GradientPlan::Buffer* planned_residual_grad_ = nullptr;
  const void* x_plain_ = nullptr;  // the plain input of the last forward
  const void* residual_ = nullptr;  // z of the next forward (fused residual)
  TensorRef out_, diff_src_, none_, diff_residual_;
};

}  // namespace sdp::nn
