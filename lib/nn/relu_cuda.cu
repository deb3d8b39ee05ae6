// CUDA kernels and layer of relu_cuda.hpp.
#include <stdexcept>

#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/elementwise_rule.hpp"
#include "nn/relu_cuda.hpp"
#include "nn/relu_kernels_cuda.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {

template <class T>
__global__ void relu_forward_kernel(const T* x, T* y, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    y[i] = cuda::store_as<T>(relu_forward(cuda::load_f32(x[i])));
}

template <class T>
__global__ void relu_backward_kernel(const T* y, const T* dy, T* dx, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    dx[i] = cuda::store_as<T>(relu_backward_from_output(cuda::load_f32(y[i]), cuda::load_f32(dy[i])));
}

template <class T>
__global__ void relu_mask_kernel(T* y, uint8_t* mask, int64_t n) {
  SDP_GRID_STRIDE(i, n) {
    const float v = relu_forward(cuda::load_f32(y[i]));
    y[i] = cuda::store_as<T>(v);
    mask[i] = v > 0.0f ? 1 : 0;
  }
}

template <class T>
__global__ void relu_backward_mask_kernel(const uint8_t* mask, const T* dy, T* dx, int64_t n) {
  SDP_GRID_STRIDE(i, n)
    dx[i] = mask[i] != 0 ? dy[i] : cuda::store_as<T>(0.0f);
}

}  // namespace

namespace cuda {

void relu_in_place(DType dtype, void* y, int64_t n, cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    relu_forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(y), static_cast<T*>(y), n);
  });
  check_launch("relu_forward_kernel");
}

void relu_backward_from_output(DType dtype, const void* y, const void* dy, void* dx, int64_t n,
                               cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    relu_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(y), static_cast<const T*>(dy),
                                                                  static_cast<T*>(dx), n);
  });
  check_launch("relu_backward_kernel");
}

void relu_in_place_with_mask(DType dtype, void* y, uint8_t* mask, int64_t n, cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    relu_mask_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(y), mask, n);
  });
  check_launch("relu_mask_kernel");
}

void relu_backward_from_mask(DType dtype, const uint8_t* mask, const void* dy, void* dx, int64_t n,
                             cudaStream_t stream) {
  with_storage_type(dtype, [&](auto tag) {
    using T = storage_t<decltype(tag)>;
    relu_backward_mask_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(mask, static_cast<const T*>(dy),
                                                                       static_cast<T*>(dx), n);
  });
  check_launch("relu_backward_mask_kernel");
}

}  // namespace cuda

ReLUCuda::ReLUCuda(Context& ctx, std::string name) : ReLU(ctx, std::move(name)) {}

TensorDesc ReLUCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "ReLU " + name_);
  training_ = training;
  configured_in_place_ = in_place_;
  out_ = {src, nullptr};
  saved_ = {};
  if (!configured_in_place_) dst_.configure(src.device, src.nbytes(), training && ctx_.planned_backward);
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  if (training && needs_input_grad_) diff_src_buffer_.configure(src.device, src.nbytes(), ctx_.planned_backward);
  return src;
}

const TensorRef& ReLUCuda::forward(const TensorRef& src) {
  // In place: the output is the input's buffer (backward reads only the output).
  out_.data = configured_in_place_ ? src.data : dst_.get();
  const int64_t n = src.desc.numel();
  cudaStream_t stream = cuda::stream_of(ctx_);
  cuda::with_storage_type(src.desc.dtype, [&](auto tag) {
    using T = cuda::storage_t<decltype(tag)>;
    relu_forward_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, stream>>>(src.as<const T>(), out_.as<T>(), n);
  });
  cuda::check_launch("relu_forward_kernel");
  return out_;
}

const TensorRef& ReLUCuda::forward_applied(const TensorRef& src) {
  if (!configured_in_place_) return run_forward(src);
  out_.data = src.data;  // what forward in place would leave: backward reads only this
  return out_;
}

const TensorRef& ReLUCuda::backward(const TensorRef& diff_dst) {
  if (!needs_input_grad_) return none_;
  if (!training_) throw std::logic_error("ReLU " + name_ + ": backward without a training configure");
  diff_src_.data = diff_src_buffer_.get();
  cuda::relu_backward_from_output(diff_dst.desc.dtype, out_.data, diff_dst.data, diff_src_.data,
                                  diff_dst.desc.numel(), cuda::stream_of(ctx_));
  return diff_src_;
}

GradientPlan::Buffer* ReLUCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  saved_ = {src, configured_in_place_ ? src : dst_.write(plan)};
  plan.next();
  return saved_.out;
}

GradientPlan::Buffer* ReLUCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  saved_.read(plan);
  GradientPlan::Buffer* diff_src = needs_input_grad_ ? diff_src_buffer_.write(plan) : nullptr;
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
