// Pool2dCuda: Pool2d on the GPU, plain NCHW inside (channels_last converted at the edges;
// with channels_last the output is NHWC, as on the CPU).
//  * Average and global average pooling: cuDNN (count_include_pad like PyTorch; the global
//    window is the whole map).
//  * Max pooling: our kernels, not cuDNN's, because the CPU twin and PyTorch route a tied
//    window's gradient to its FIRST maximum only and propagate NaN, which cuDNN does not
//    promise. Forward records each window's argmax (its place in the window, one byte);
//    backward gathers, for every input element, the gradients of the windows whose argmax it
//    is, in a fixed order (deterministic, no atomics); the arithmetic is pool_rule.hpp's,
//    which the CPU tests run against the CPU twin. A fused ReLU is applied to the pooled value and
//    its derivative taken from the output.
//  * Native channels_last (Context::channels_last, NHWC input): max pooling's kernels
//    index NHWC (pool_rule.hpp), 16 bytes of channels a thread where C allows; global
//    average pooling is our NHWC kernel whose [N, C, 1, 1]
//    output is the same bytes in either layout (given as plain, which Flatten takes as is);
//    no conversion runs. Other average pooling converts as above.
#pragma once

#include <initializer_list>
#include <memory>

#include "nn/context_cuda.hpp"
#include "nn/pool2d.hpp"

namespace sdp::nn {

class Pool2dCuda final : public Pool2d {
 public:
  Pool2dCuda(Context& ctx, std::string name, const Pool2dOptions& options);
  ~Pool2dCuda() override;

  TensorDesc configure(const TensorDesc& src, bool training) override;
  const TensorRef& forward(const TensorRef& src) override;
  const TensorRef& backward(const TensorRef& diff_dst) override;
  GradientPlan::Buffer* plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) override;
  GradientPlan::Buffer* plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) override;

 private:
  struct Impl;
  template <class T>
  bool vectorized(std::initializer_list<const void*> tensors, const void* argmax) const;

  std::unique_ptr<Impl> impl_;
  bool training_ = false;
  bool native_nhwc_ = false;
  int64_t kernel_ = 0, stride_ = 1, padding_ = 0;
  TensorDesc plain_src_, plain_dst_;
  CudaLayoutAdapter src_to_plain_, dst_out_, diff_dst_to_plain_, diff_src_out_;
  CudaBuffer argmax_;
  PlannedCudaBuffer dst_plain_, diff_src_plain_;
  SavedForward saved_;
  const void* x_plain_ = nullptr;
  TensorRef out_, diff_src_, none_;
};

}  // namespace sdp::nn
