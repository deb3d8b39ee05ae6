// CUDA kernel and layer of dropout_cuda.hpp.
#include <stdexcept>

#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/dropout_cuda.hpp"
#include "nn/dropout_rule.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {
template <class T>
__global__ void dropout_kernel(const T* x, const float* mask, T* y, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    y[i] = cuda::store_as<T>(dropout_apply(cuda::load_f32(x[i]), mask[i]));
}

// y = x * mask over `n` elements of `dtype`.
void apply_mask(DType dtype, const void* x, const float* mask, void* y, int64_t n, cudaStream_t stream) {
  cuda::with_storage_type(dtype, [&](auto tag) {
    using T = cuda::storage_t<decltype(tag)>;
    dropout_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, stream>>>(static_cast<const T*>(x), mask,
                                                                        static_cast<T*>(y), n);
  });
  cuda::check_launch("dropout_kernel");
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
    dst_.configure(src.device, src.nbytes(), ctx_.planned_backward);
    diff_src_buffer_.configure(src.device, src.nbytes(), ctx_.planned_backward);
  }
  return src;
}

const TensorRef& DropoutCuda::forward(const TensorRef& src) {
  if (!active()) {
    out_.data = src.data;
    return out_;
  }
  out_.data = dst_.get();
  cudaStream_t s = cuda::stream_of(ctx_);
  // A pageable host-to-device cudaMemcpyAsync returns once the host bytes are staged, so the
  // next draw may overwrite mask_ while the DMA is still in flight.
  if (draw_mask())
    cuda::check(cudaMemcpyAsync(mask_device_.get(), mask_.data(), mask_.size() * sizeof(float),
                                cudaMemcpyHostToDevice, s),
                "cudaMemcpyAsync");
  const int64_t n = src.desc.numel();
  apply_mask(src.desc.dtype, src.data, mask_device_.as<const float>(), out_.data, n, s);
  return out_;
}

const TensorRef& DropoutCuda::backward(const TensorRef& diff_dst) {
  if (!needs_input_grad_) return none_;
  if (!active()) {
    diff_src_.data = diff_dst.data;  // the identity
    return diff_src_;
  }
  const int64_t n = diff_dst.desc.numel();
  diff_src_.data = diff_src_buffer_.get();
  apply_mask(diff_dst.desc.dtype, diff_dst.data, mask_device_.as<const float>(), diff_src_.data, n,
             cuda::stream_of(ctx_));
  return diff_src_;
}

// Inactive, the output is the input; active, backward reads only its mask (its own).
GradientPlan::Buffer* DropoutCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  GradientPlan::Buffer* out = active() ? dst_.write(plan) : src;
  plan.next();
  return out;
}

GradientPlan::Buffer* DropoutCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  GradientPlan::Buffer* diff_src = nullptr;
  if (needs_input_grad_) diff_src = active() ? diff_src_buffer_.write(plan) : diff_dst;
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
