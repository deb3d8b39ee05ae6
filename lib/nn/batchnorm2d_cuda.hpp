// BatchNorm2dCuda: BatchNorm2d on cuDNN's spatial batch normalization (legacy API), plain
// NCHW inside (channels_last converted at the edges). Training normalizes with the batch
// statistics and folds them into the running buffers with the CPU twin's convention
// (running = (1 - momentum) running + momentum batch; the running variance unbiased, as
// cuDNN keeps it); inference uses the running statistics. A fused ReLU is our kernel, which
// also records where the output was positive: backward_reads_output() is false, so a
// consumer may overwrite the output before backward (ResidualBlock's in-place sum).
// Parameter gradients overwritten (cuDNN's beta = 0) and reported before the input gradient
// is returned; cuDNN computes both in one call, as oneDNN does.
#pragma once

#include <memory>

#include "nn/batchnorm2d.hpp"
#include "nn/context_cuda.hpp"

namespace sdp::nn {

class BatchNorm2dCuda final : public BatchNorm2d {
 public:
  BatchNorm2dCuda(Context& ctx, std::string name, const BatchNorm2dOptions& options);
  ~BatchNorm2dCuda() override;

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool training_ = false;
  TensorDesc plain_src_;
  CudaLayoutAdapter src_to_plain_, diff_src_out_;
  CudaBuffer dst_, save_mean_, save_inv_var_, relu_mask_, diff_pre_relu_, diff_src_plain_;
  const void* x_plain_ = nullptr;  // the plain input of the last forward
  TensorRef out_, diff_src_, none_;
};

}  // namespace sdp::nn
