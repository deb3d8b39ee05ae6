// CUDA kernel and layer of dropout_cuda.hpp.
#include <stdexcept>

#include "nn/cuda_util_cuda.hpp"
#include "nn/dropout_cuda.hpp"
#include "nn/dropout_rule.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {
__global__ void dropout_kernel(const float* x, const float* mask, float* y, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    y[i] = dropout_apply(x[i], mask[i]);
}
}  // namespace

DropoutCuda::DropoutCuda(Context& ctx, std::string name, float p) : Dropout(ctx, std::move(name), p) {}

TensorDesc DropoutCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "Dropout " + name_);
  training_ = training;
  out_ = {src, nullptr};
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  if (active()) {
    const std::size_t n = static_cast<std::size_t>(src.numel());
    if (mask_.size() != n) mask_ready_ = false;
    mask_.resize(n);
    mask_device_.reserve(src.device, n * sizeof(float));
    out_.data = dst_.reserve(src.device, src.nbytes());
    diff_src_.data = diff_src_buffer_.reserve(src.device, src.nbytes());
  }
  return src;
}

const TensorRef& DropoutCuda::forward(const TensorRef& src) {
  if (!active()) {
    out_.data = src.data;
    return out_;
  }
  cudaStream_t s = cuda::stream_of(ctx_);
  // A pageable host-to-device cudaMemcpyAsync returns once the host bytes are staged, so the
  // next draw may overwrite mask_ while the DMA is still in flight.
  if (draw_mask())
    cuda::check(cudaMemcpyAsync(mask_device_.get(), mask_.data(), mask_.size() * sizeof(float),
                                cudaMemcpyHostToDevice, s),
                "cudaMemcpyAsync");
  const int64_t n = src.desc.numel();
  dropout_kernel<<<cuda::grid_for(n), cuda::kThreads, 0, s>>>(src.as<const float>(), mask_device_.as<const float>(),
                                                             out_.as<float>(), n);
  cuda::check_launch("dropout_kernel");
  return out_;
}

const TensorRef& DropoutCuda::backward(const TensorRef& diff_dst) {
  if (!needs_input_grad_) return none_;
  if (!active()) {
    diff_src_.data = diff_dst.data;  // the identity
    return diff_src_;
  }
  const int64_t n = diff_dst.desc.numel();
  dropout_kernel<<<cuda::grid_for(n), cuda::kThreads, 0, cuda::stream_of(ctx_)>>>(
      diff_dst.as<const float>(), mask_device_.as<const float>(), diff_src_.as<float>(), n);
  cuda::check_launch("dropout_kernel");
  return diff_src_;
}

GradientPlan::Buffer* DropoutCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  plan.next();
  if (!needs_input_grad_) return nullptr;
  return active() ? nullptr : diff_dst;
}

}  // namespace sdp::nn
