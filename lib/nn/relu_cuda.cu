// CUDA kernels and layer of relu_cuda.hpp.
#include <stdexcept>

#include "nn/cuda_util_cuda.hpp"
#include "nn/elementwise_rule.hpp"
#include "nn/relu_cuda.hpp"
#include "nn/relu_kernels_cuda.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    y[i] = relu_forward(x[i]);
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    dx[i] = relu_backward_from_output(y[i], dy[i]);
}

__global__ void relu_mask_kernel(float* y, uint8_t* mask, int64_t n) {
  SDP_GRID_STRIDE(i, n) {
    const float v = relu_forward(y[i]);
    y[i] = v;
    mask[i] = v > 0.0f ? 1 : 0;
  }
}

__global__ void relu_backward_mask_kernel(const uint8_t* mask, const float* dy, float* dx, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    dx[i] = mask[i] != 0 ? dy[i] : 0.0f;
}

}  // namespace

namespace cuda {

void relu_in_place(float* y, int64_t n, cudaStream_t stream) {
  relu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, y, n);
  check_launch("relu_forward_kernel");
}

void relu_backward_from_output(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  relu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, dy, dx, n);
  check_launch("relu_backward_kernel");
}

void relu_in_place_with_mask(float* y, uint8_t* mask, int64_t n, cudaStream_t stream) {
  relu_mask_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, mask, n);
  check_launch("relu_mask_kernel");
}

void relu_backward_from_mask(const uint8_t* mask, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  relu_backward_mask_kernel<<<grid_for(n), kThreads, 0, stream>>>(mask, dy, dx, n);
  check_launch("relu_backward_mask_kernel");
}

}  // namespace cuda

ReLUCuda::ReLUCuda(Context& ctx, std::string name) : ReLU(ctx, std::move(name)) {}

TensorDesc ReLUCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "ReLU " + name_);
  training_ = training;
  configured_in_place_ = in_place_;
  out_ = {src, nullptr};
  if (!configured_in_place_) out_.data = dst_.reserve(src.device, src.nbytes());
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  if (training && needs_input_grad_) diff_src_.data = diff_src_buffer_.reserve(src.device, src.nbytes());
  return src;
}

const TensorRef& ReLUCuda::forward(const TensorRef& src) {
  // In place: the output is the input's buffer (backward reads only the output).
  if (configured_in_place_) out_.data = src.data;
  const int64_t n = src.desc.numel();
  relu_forward_kernel<<<cuda::grid_for(n), cuda::kThreads, 0, cuda::stream_of(ctx_)>>>(src.as<const float>(),
                                                                                      out_.as<float>(), n);
  cuda::check_launch("relu_forward_kernel");
  return out_;
}

const TensorRef& ReLUCuda::backward(const TensorRef& diff_dst) {
  if (!needs_input_grad_) return none_;
  if (!training_ || diff_src_.empty())
    throw std::logic_error("ReLU " + name_ + ": backward without a training configure");
  const int64_t n = diff_dst.desc.numel();
  relu_backward_kernel<<<cuda::grid_for(n), cuda::kThreads, 0, cuda::stream_of(ctx_)>>>(
      out_.as<const float>(), diff_dst.as<const float>(), diff_src_.as<float>(), n);
  cuda::check_launch("relu_backward_kernel");
  return diff_src_;
}

GradientPlan::Buffer* ReLUCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  plan.next();
  return nullptr;
}

}  // namespace sdp::nn
