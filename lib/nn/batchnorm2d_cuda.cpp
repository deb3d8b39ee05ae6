// BatchNorm2dCuda (batchnorm2d_cuda.hpp) on cuDNN.
#include "nn/batchnorm2d_cuda.hpp"

#include <stdexcept>

#include "nn/cuda_util_cuda.hpp"
#include "nn/cudnn_cuda.hpp"
#include "nn/relu_kernels_cuda.hpp"

namespace sdp::nn {

struct BatchNorm2dCuda::Impl {
  cuda::TensorDescriptor x;   // plain NCHW; also y, dy and dx
  cuda::TensorDescriptor bn;  // [1, C, 1, 1], derived from x
};

BatchNorm2dCuda::BatchNorm2dCuda(Context& ctx, std::string name, const BatchNorm2dOptions& options)
    : BatchNorm2d(ctx, std::move(name), options), impl_(std::make_unique<Impl>()) {}

BatchNorm2dCuda::~BatchNorm2dCuda() = default;

TensorDesc BatchNorm2dCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "BatchNorm2d " + name_);
  check_input(src.shape);
  if (options_.eps < CUDNN_BN_MIN_EPSILON)
    throw std::invalid_argument("BatchNorm2d " + name_ + ": eps below cuDNN's minimum");
  training_ = training;
  const Device& device = src.device;
  plain_src_ = TensorDesc::plain(src.shape, device, src.dtype);
  src_to_plain_.configure(src, plain_src_);
  // f16/bf16 activations (mixed precision) with f32 scale, shift and statistics: cuDNN
  // derives the f32 parameter descriptor from the data's.
  impl_->x.set_nchw(src.shape, src.dtype);
  cuda::check_cudnn(cudnnDeriveBNTensorDescriptor(impl_->bn.get(), impl_->x.get(), CUDNN_BATCHNORM_SPATIAL),
                    "cudnnDeriveBNTensorDescriptor");
  cuda::cudnn_handle(ctx_);  // created here, not in the step loop
  out_ = {plain_src_, dst_.reserve(device, plain_src_.nbytes())};
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  if (training) {
    const std::size_t channel_bytes = static_cast<std::size_t>(options_.channels) * sizeof(float);
    save_mean_.reserve(device, channel_bytes);
    save_inv_var_.reserve(device, channel_bytes);
    if (options_.fuse_relu) {
      relu_mask_.reserve(device, static_cast<std::size_t>(plain_src_.numel()));
      diff_pre_relu_.reserve(device, plain_src_.nbytes());
    }
    // Written even when nobody needs it: cuDNN computes it with the parameter gradients.
    diff_src_plain_.reserve(device, plain_src_.nbytes());
    diff_src_out_.configure(plain_src_, src);
  }
  return out_.desc;
}

const TensorRef& BatchNorm2dCuda::forward(const TensorRef& src) {
  Impl& d = *impl_;
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const float one = 1.0f, zero = 0.0f;
  x_plain_ = src_to_plain_.convert(ctx_, src).data;
  void* y = out_.data;
  const DType dtype = plain_src_.dtype;
  const int64_t n = plain_src_.numel();
  cudaStream_t stream = cuda::stream_of(ctx_);
  // Arena views are re-read every call: the store may rebind its arenas.
  if (!training_) {
    cuda::check_cudnn(cudnnBatchNormalizationForwardInference(
                          handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), x_plain_, d.x.get(), y, d.bn.get(),
                          weight_->value.raw(), bias_->value.raw(), running_mean_->value.raw(),
                          running_var_->value.raw(), options_.eps),
                      "cudnnBatchNormalizationForwardInference");
    if (options_.fuse_relu) cuda::relu_in_place(dtype, y, n, stream);
    return out_;
  }
  // exponentialAverageFactor = momentum: running = factor * batch + (1 - factor) * running,
  // the CPU twin's update_running_stats_host, with the unbiased batch variance.
  cuda::check_cudnn(cudnnBatchNormalizationForwardTraining(
                        handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), x_plain_, d.x.get(), y, d.bn.get(),
                        weight_->value.raw(), bias_->value.raw(), static_cast<double>(options_.momentum),
                        running_mean_->value.raw(), running_var_->value.raw(), options_.eps, save_mean_.get(),
                        save_inv_var_.get()),
                    "cudnnBatchNormalizationForwardTraining");
  if (options_.fuse_relu) cuda::relu_in_place_with_mask(dtype, y, relu_mask_.as<uint8_t>(), n, stream);
  return out_;
}

const TensorRef& BatchNorm2dCuda::backward(const TensorRef& diff_dst) {
  if (!training_) throw std::logic_error("BatchNorm2d " + name_ + ": backward after inference forward");
  Impl& d = *impl_;
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const float one = 1.0f, zero = 0.0f;
  const void* g = diff_dst.data;  // plain: the layout configure promised for the output
  if (options_.fuse_relu) {
    cuda::relu_backward_from_mask(plain_src_.dtype, relu_mask_.as<const uint8_t>(), g, diff_pre_relu_.get(),
                                  plain_src_.numel(), cuda::stream_of(ctx_));
    g = diff_pre_relu_.get();
  }
  // alpha/beta for the data gradient and for the parameter gradients: 1 and 0, overwrite.
  cuda::check_cudnn(cudnnBatchNormalizationBackward(handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                                    d.x.get(), x_plain_, d.x.get(), g, d.x.get(),
                                                    diff_src_plain_.get(), d.bn.get(), weight_->value.raw(),
                                                    weight_->grad.raw(), bias_->grad.raw(), options_.eps,
                                                    save_mean_.get(), save_inv_var_.get()),
                    "cudnnBatchNormalizationBackward");
  grads_ready();
  if (!needs_input_grad_) return none_;
  diff_src_.data = diff_src_out_.convert(ctx_, {plain_src_, diff_src_plain_.get()}).data;
  return diff_src_;
}

GradientPlan::Buffer* BatchNorm2dCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  plan.next();
  return nullptr;
}

}  // namespace sdp::nn
