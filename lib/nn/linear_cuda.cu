// CUDA layer of linear_cuda.hpp: cuBLAS GEMMs (shapes from linear_gemm_rule.hpp, where the
// row-major/column-major mapping is written out) and the bias kernels. beta = 0 everywhere:
// the weight gradient is overwritten, as the Layer contract says.
#include <stdexcept>

#include "core/cuda_casts.hpp"
#include "nn/cublas_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/linear_cuda.hpp"
#include "nn/linear_gemm_rule.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {

// y[i, j] += b[j] over the [n, features] output (b: the f32 parameter).
template <class T>
__global__ void add_bias_kernel(T* y, const float* b, int64_t n, int64_t features) {
  const int64_t total = n * features;
  SDP_GRID_STRIDE(i, total)
    y[i] = cuda::store_as<T>(cuda::load_f32(y[i]) + b[i % features]);
}

// db[j] = sum_i dy[i, j], one thread per feature summing the batch in order (deterministic;
// neighbouring threads read neighbouring columns, so the reads coalesce).
template <class T>
__global__ void bias_grad_kernel(const T* dy, float* db, int64_t n, int64_t features) {
  SDP_GRID_STRIDE(j, features) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += cuda::load_f32(dy[i * features + j]);
    db[j] = sum;
  }
}

cublasOperation_t op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
  }
  throw std::logic_error("no cuBLAS type for this dtype");
}

// C = op(A) op(B) with the shape's dimensions, beta = 0: A and B of `ab`, C of `c_type`,
// accumulated in f32. All f32: cublasSgemm in the handle's pedantic math (no TF32), or with
// `tf32` cublasGemmEx in CUBLAS_COMPUTE_32F_FAST_TF32. 16-bit A and B (mixed precision):
// cublasGemmEx on tensor cores. The handle's math mode is lifted for a GemmEx call only.
void gemm(cublasHandle_t handle, const GemmShape& g, DType ab, const void* a, const void* b, DType c_type, void* c,
          bool tf32, const char* what) {
  const float one = 1.0f, zero = 0.0f;
  if (ab == DType::kF32 && c_type == DType::kF32 && !tf32) {
    cuda::check_cublas(cublasSgemm(handle, op(g.trans_a), op(g.trans_b), g.m, g.n, g.k, &one,
                                   static_cast<const float*>(a), g.lda, static_cast<const float*>(b), g.ldb, &zero,
                                   static_cast<float*>(c), g.ldc),
                       what);
    return;
  }
  cuda::check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  const cublasStatus_t status =
      cublasGemmEx(handle, op(g.trans_a), op(g.trans_b), g.m, g.n, g.k, &one, a, cuda_type(ab), g.lda, b,
                   cuda_type(ab), g.ldb, &zero, c, cuda_type(c_type), g.ldc,
                   ab == DType::kF32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cuda::check_cublas(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  cuda::check_cublas(status, what);
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
  out_ = {TensorDesc::plain({batch_, options_.out_features}, src.device, src.dtype), nullptr};
  if (src.dtype != DType::kF32)
    weight_lp_.reserve(src.device, static_cast<std::size_t>(weight_->value.numel()) * dtype_size(src.dtype));
  saved_ = {};
  dst_.configure(src.device, out_.desc.nbytes(), training && ctx_.planned_backward);
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  if (training && needs_input_grad_) diff_src_buffer_.configure(src.device, src.nbytes(), ctx_.planned_backward);
  return out_.desc;
}

const TensorRef& LinearCuda::forward(const TensorRef& src) {
  src_ = src;  // kept for the weight gradient
  out_.data = dst_.get();
  const int out = options_.out_features;
  const LinearGemms g = linear_gemms(static_cast<int>(batch_), options_.in_features, out);
  const DType dtype = src.desc.dtype;
  cudaStream_t stream = cuda::stream_of(ctx_);
  gemm(cuda::cublas_handle(ctx_), g.forward, dtype, weight_values(), src.data, dtype, out_.data, ctx_.rules.tf32,
       "cuBLAS GEMM (Linear forward)");
  if (bias_) {
    const int64_t total = batch_ * out;
    cuda::with_storage_type(dtype, [&](auto tag) {
      using T = cuda::storage_t<decltype(tag)>;
      add_bias_kernel<T><<<cuda::grid_for(total), cuda::kThreads, 0, stream>>>(
          out_.as<T>(), bias_->value.data<float>(), batch_, out);
    });
    cuda::check_launch("add_bias_kernel");
  }
  return out_;
}

const TensorRef& LinearCuda::backward(const TensorRef& diff_dst) {
  if (!training_) throw std::logic_error("Linear " + name_ + ": backward after inference forward");
  cublasHandle_t handle = cuda::cublas_handle(ctx_);
  const int out = options_.out_features;
  const LinearGemms g = linear_gemms(static_cast<int>(batch_), options_.in_features, out);
  const DType dtype = diff_dst.desc.dtype;
  cudaStream_t stream = cuda::stream_of(ctx_);
  // Weight gradient first so the hook can start reducing it while the input gradient runs.
  // Under mixed precision it comes out of the 16-bit GEMM straight into the f32 arena.
  gemm(handle, g.weight_grad, dtype, src_.data, diff_dst.data, DType::kF32, weight_->grad.raw(), ctx_.rules.tf32,
       "cuBLAS GEMM (Linear weight gradient)");
  if (bias_) {
    cuda::with_storage_type(dtype, [&](auto tag) {
      using T = cuda::storage_t<decltype(tag)>;
      bias_grad_kernel<T><<<cuda::grid_for(out), cuda::kThreads, 0, stream>>>(
          diff_dst.as<const T>(), bias_->grad.data<float>(), batch_, out);
    });
    cuda::check_launch("bias_grad_kernel");
  }
  grads_ready();

  if (!needs_input_grad_) return none_;
  // The weights as forward's GEMM read them (their cast under mixed precision).
  const void* w = dtype == DType::kF32 ? weight_->value.raw() : weight_lp_.get();
  diff_src_.data = diff_src_buffer_.get();
  gemm(handle, g.input_grad, dtype, w, diff_dst.data, dtype, diff_src_.data, ctx_.rules.tf32,
       "cuBLAS GEMM (Linear input gradient)");
  return diff_src_;
}

const void* LinearCuda::weight_values() {
  // Arena views are re-read every call: the store may rebind its arenas. Under mixed
  // precision the weights are cast here, after the optimizer's last update, and backward
  // uses the same cast.
  if (src_.desc.dtype == DType::kF32) return weight_->value.raw();
  cuda_casts::from_f32(src_.desc.dtype, weight_lp_.get(), weight_->value.data<float>(), weight_->value.numel(), 1.0f,
                       ctx_.stream.get());
  return weight_lp_.get();
}

GradientPlan::Buffer* LinearCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  saved_ = {src, dst_.write(plan)};
  plan.next();
  return saved_.out;
}

GradientPlan::Buffer* LinearCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  saved_.read(plan);
  GradientPlan::Buffer* diff_src = needs_input_grad_ ? diff_src_buffer_.write(plan) : nullptr;
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
