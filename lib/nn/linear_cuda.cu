// CUDA layer of linear_cuda.hpp: cuBLAS GEMMs (shapes from linear_gemm_rule.hpp, where the
// row-major/column-major mapping is written out) and the bias kernels. beta = 0 everywhere:
// the weight gradient is overwritten, as the Layer contract says.
#include <stdexcept>

#include "nn/cublas_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/linear_cuda.hpp"
#include "nn/linear_gemm_rule.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {

// y[i, j] += b[j] over the [n, features] output.
__global__ void add_bias_kernel(float* y, const float* b, int64_t n, int64_t features) {
  const int64_t total = n * features;
  SDP_GRID_STRIDE(i, total)
    y[i] += b[i % features];
}

// db[j] = sum_i dy[i, j], one thread per feature summing the batch in order (deterministic;
// neighbouring threads read neighbouring columns, so the reads coalesce).
__global__ void bias_grad_kernel(const float* dy, float* db, int64_t n, int64_t features) {
  SDP_GRID_STRIDE(j, features) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += dy[i * features + j];
    db[j] = sum;
  }
}

cublasOperation_t op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

// C = op(A) op(B) with the shape's dimensions, f32, beta = 0.
void gemm(cublasHandle_t handle, const GemmShape& g, const float* a, const float* b, float* c, const char* what) {
  const float one = 1.0f, zero = 0.0f;
  cuda::check_cublas(cublasSgemm(handle, op(g.trans_a), op(g.trans_b), g.m, g.n, g.k, &one, a, g.lda, b, g.ldb, &zero,
                                 c, g.ldc),
                     what);
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
  const int out = options_.out_features;
  const LinearGemms g = linear_gemms(static_cast<int>(batch_), options_.in_features, out);
  // Arena views are re-read every call: the store may rebind its arenas.
  gemm(cuda::cublas_handle(ctx_), g.forward, weight_->value.data<float>(), src.as<const float>(), out_.as<float>(),
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
  const int out = options_.out_features;
  const LinearGemms g = linear_gemms(static_cast<int>(batch_), options_.in_features, out);
  // Weight gradient first so the hook can start reducing it while the input gradient runs.
  gemm(handle, g.weight_grad, src_.as<const float>(), diff_dst.as<const float>(), weight_->grad.data<float>(),
       "cublasSgemm (Linear weight gradient)");
  if (bias_) {
    bias_grad_kernel<<<cuda::grid_for(out), cuda::kThreads, 0, cuda::stream_of(ctx_)>>>(
        diff_dst.as<const float>(), bias_->grad.data<float>(), batch_, out);
    cuda::check_launch("bias_grad_kernel");
  }
  grads_ready();

  if (!needs_input_grad_) return none_;
  gemm(handle, g.input_grad, weight_->value.data<float>(), diff_dst.as<const float>(), diff_src_.as<float>(),
       "cublasSgemm (Linear input gradient)");
  return diff_src_;
}

GradientPlan::Buffer* LinearCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  plan.next();
  return nullptr;
}

}  // namespace sdp::nn
