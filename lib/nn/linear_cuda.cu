// CUDA layer of linear_cuda.hpp: cuBLAS GEMMs and the bias kernels.
//
// cuBLAS is column-major; a row-major [r, c] matrix is the column-major [c, r] matrix, its
// transpose, with leading dimension c. With X [N, in], W [out, in], Y and dY [N, out]:
//   forward        Y^T  = W · X^T     -> gemm(T, N, m=out, n=N,   k=in,  W (ld in),  X (ld in),   Y (ld out))
//   weight grad    dW^T = X^T · dY    -> gemm(N, T, m=in,  n=out, k=N,   X (ld in),  dY (ld out), dW (ld in))
//   input grad     dX^T = W^T · dY^T  -> gemm(N, N, m=in,  n=N,   k=out, W (ld in),  dY (ld out), dX (ld in))
// beta = 0 everywhere: the weight gradient is overwritten, as the Layer contract says.
#include <stdexcept>

#include "nn/cublas_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/linear_cuda.hpp"

namespace sdp::nn {

namespace {

// y[i, j] += b[j] over the [n, features] output.
__global__ void add_bias_kernel(float* y, const float* b, int64_t n, int64_t features) {
  const int64_t total = n * features;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    y[i] += b[i % features];
}

// db[j] = sum_i dy[i, j], one thread per feature summing the batch in order (deterministic;
// neighbouring threads read neighbouring columns, so the reads coalesce).
__global__ void bias_grad_kernel(const float* dy, float* db, int64_t n, int64_t features) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < features; j += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += dy[i * features + j];
    db[j] = sum;
  }
}

int as_int(int64_t v, const std::string& what) {
  if (v > 2147483647) throw std::invalid_argument(what + ": dimension " + std::to_string(v) + " exceeds cuBLAS's int");
  return static_cast<int>(v);
}

}  // namespace

LinearCuda::LinearCuda(Context& ctx, std::string name, const LinearOptions& options)
    : Linear(ctx, std::move(name), options) {}

TensorDesc LinearCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "Linear " + name_);
  check_input(src.shape);
  training_ = training;
  batch_ = src.shape[0];
  as_int(batch_, "Linear " + name_);
  cuda::cublas_handle(ctx_);  // created here, not in the step loop
  out_ = {TensorDesc::plain({batch_, options_.out_features}, src.device), nullptr};
  out_.data = dst_.reserve(src.device, out_.desc.nbytes());
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  if (training && needs_input_grad_) diff_src_.data = diff_src_buffer_.reserve(src.device, src.nbytes());
  return out_.desc;
}

const TensorRef& LinearCuda::forward(const TensorRef& src) {
  src_ = src;  // kept for the weight gradient
  const int n = static_cast<int>(batch_), in = options_.in_features, out = options_.out_features;
  const float one = 1.0f, zero = 0.0f;
  // Arena views are re-read every call: the store may rebind its arenas.
  cuda::check_cublas(cublasSgemm(cuda::cublas_handle(ctx_), CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one,
                                 weight_->value.data<float>(), in, src.as<const float>(), in, &zero,
                                 out_.as<float>(), out),
                     "cublasSgemm (Linear forward)");
  if (bias_) {
    const int64_t total = batch_ * out;
    add_bias_kernel<<<cuda::grid_for(total), cuda::kThreads, 0, cuda::stream_of(ctx_)>>>(
        out_.as<float>(), bias_->value.data<float>(), batch_, out);
    cuda::check_launch("add_bias_kernel");
  }
  return out_;
}

const TensorRef& LinearCuda::backward(const TensorRef& diff_dst) {
  if (!training_) throw std::logic_error("Linear " + name_ + ": backward after inference forward");
  cublasHandle_t handle = cuda::cublas_handle(ctx_);
  const int n = static_cast<int>(batch_), in = options_.in_features, out = options_.out_features;
  const float one = 1.0f, zero = 0.0f;
  // Weight gradient first so the hook can start reducing it while the input gradient runs.
  cuda::check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, src_.as<const float>(), in,
                                 diff_dst.as<const float>(), out, &zero, weight_->grad.data<float>(), in),
                     "cublasSgemm (Linear weight gradient)");
  if (bias_) {
    bias_grad_kernel<<<cuda::grid_for(out), cuda::kThreads, 0, cuda::stream_of(ctx_)>>>(
        diff_dst.as<const float>(), bias_->grad.data<float>(), batch_, out);
    cuda::check_launch("bias_grad_kernel");
  }
  grads_ready();

  if (!needs_input_grad_) return none_;
  cuda::check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, weight_->value.data<float>(), in,
                                 diff_dst.as<const float>(), out, &zero, diff_src_.as<float>(), in),
                     "cublasSgemm (Linear input gradient)");
  return diff_src_;
}

GradientPlan::Buffer* LinearCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  plan.next();
  return nullptr;
}

}  // namespace sdp::nn
