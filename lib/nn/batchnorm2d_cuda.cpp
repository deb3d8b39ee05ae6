// BatchNorm2dCuda (batchnorm2d_cuda.hpp) on cuDNN.
#include "nn/batchnorm2d_cuda.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device_memory.hpp"
#include "nn/batchnorm_fold_cuda.hpp"
#include "nn/channels_last_cuda.hpp"
#include "nn/conv2d_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/cudnn_cuda.hpp"
#include "nn/cudnn_fusion_cuda.hpp"
#include "nn/relu_kernels_cuda.hpp"

namespace sdp::nn {

struct BatchNorm2dCuda::Impl {
  cuda::TensorDescriptor x;   // plain NCHW or NHWC; also y, z, dy, dz and dx
  cuda::TensorDescriptor bn;  // [1, C, 1, 1], derived from x
  cuda::ReluDescriptor relu;
  // Native channels_last: the mode and fused operation cuDNN accepted, and their buffers' sizes.
  cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN;
  std::size_t reserve_bytes = 0;
  cuda::OperationWorkspace forward_workspace, backward_workspace;
  // Folded with the block's sum: cuDNN's batchnorm backward, through the ReLU's mask for the
  // branch's last BatchNorm, without for a projection shortcut's.
  std::shared_ptr<const cuda::FusedConvGraph> folded_backward;
};

namespace {
// Whether cuDNN's Ex batch normalization takes (mode, ops) for `x` (its size queries answer
// CUDNN_STATUS_NOT_SUPPORTED otherwise), and the workspaces and reserve space it needs.
bool ex_supported(cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
                  const cuda::TensorDescriptor& x, const cuda::TensorDescriptor& bn, cudnnActivationDescriptor_t relu,
                  std::size_t* forward, std::size_t* backward, std::size_t* reserve) {
  const cudnnTensorDescriptor_t z = ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION ? x.get() : nullptr;
  const cudnnActivationDescriptor_t act = ops == CUDNN_BATCHNORM_OPS_BN ? nullptr : relu;
  if (cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(handle, mode, ops, x.get(), z, x.get(), bn.get(), act,
                                                               forward) != CUDNN_STATUS_SUCCESS)
    return false;
  if (cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle, mode, ops, x.get(), x.get(), x.get(), z, x.get(),
                                                        bn.get(), act, backward) != CUDNN_STATUS_SUCCESS)
    return false;
  if (cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, mode, ops, act, x.get(), reserve) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  return true;
}
}  // namespace

BatchNorm2dCuda::BatchNorm2dCuda(Context& ctx, std::string name, const BatchNorm2dOptions& options)
    : BatchNorm2d(ctx, std::move(name), options), impl_(std::make_unique<Impl>()) {}

BatchNorm2dCuda::~BatchNorm2dCuda() = default;

bool BatchNorm2dCuda::backward_reads_output() const {
  return !folded_ && !residual_folded_ && !shortcut_folded_ && native_nhwc_ &&
         impl_->ops != CUDNN_BATCHNORM_OPS_BN;
}

bool BatchNorm2dCuda::keeps_output_for_backward() const {
  return backward_reads_output() || !ctx_.lean_plan;
}

TensorDesc BatchNorm2dCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "BatchNorm2d " + name_);
  check_input(src.shape);
  if (options_.eps < CUDNN_BN_MIN_EPSILON)
    throw std::invalid_argument("BatchNorm2d " + name_ + ": eps below cuDNN's minimum");
  training_ = training;
  const Device& device = src.device;
  native_nhwc_ = ctx_.channels_last && src.layout == Layout::kChannelsLast;
  residual_fused_ = false;  // the block asks again (fuse_residual_add_relu, fold_between)
  folded_ = residual_folded_ = shortcut_folded_ = false;
  folded_shortcut_ = nullptr;
  impl_->folded_backward = nullptr;
  residual_ = nullptr;
  plain_src_ = native_nhwc_ ? src : TensorDesc::plain(src.shape, device, src.dtype);
  src_to_plain_.configure(src, plain_src_);
  // f16/bf16 activations (mixed precision) with f32 scale, shift and statistics: cuDNN
  // derives the f32 parameter descriptor from the data's.
  if (native_nhwc_)
    impl_->x.set_nhwc(src.shape, src.dtype);
  else
    impl_->x.set_nchw(src.shape, src.dtype);
  cuda::cudnn_handle(ctx_);  // created here, not in the step loop
  out_ = {plain_src_, nullptr};
  saved_ = {};
  planned_residual_ = nullptr;
  dst_.configure(device, plain_src_.nbytes(), training && ctx_.planned_backward);
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  impl_->forward_workspace.reset();  // an inference configure, or the NCHW kernels, use none of their own
  impl_->backward_workspace.reset();
  if (native_nhwc_) {
    choose_fused_operation(false);
  } else {
    impl_->mode = CUDNN_BATCHNORM_SPATIAL;
    impl_->ops = CUDNN_BATCHNORM_OPS_BN;
    cuda::check_cudnn(cudnnDeriveBNTensorDescriptor(impl_->bn.get(), impl_->x.get(), CUDNN_BATCHNORM_SPATIAL),
                      "cudnnDeriveBNTensorDescriptor");
  }
  if (training) {
    const std::size_t channel_bytes = static_cast<std::size_t>(options_.channels) * sizeof(float);
    save_mean_.reserve(device, channel_bytes);
    save_inv_var_.reserve(device, channel_bytes);
    // A ReLU cuDNN does not fuse is our kernel with a mask (NCHW, or a fallback on NHWC).
    const bool planned = ctx_.planned_backward;
    if (options_.fuse_relu && impl_->ops == CUDNN_BATCHNORM_OPS_BN) {
      relu_mask_.reserve(device, static_cast<std::size_t>(plain_src_.numel()));
      diff_pre_relu_.configure(device, plain_src_.nbytes(), planned);
    }
    // Written even when nobody needs it: cuDNN computes it with the parameter gradients.
    diff_src_plain_.configure(device, plain_src_.nbytes(), planned);
    diff_src_out_.configure(plain_src_, src, planned);
  }
  return out_.desc;
}

// Best first: the persistent kernels with the ReLU (and sum) fused; the persistent kernels
// alone; the plain spatial kernels. cuDNN documents the fused operations for f16; they are
// offered to bf16 and f32 too, taken where cuDNN's size queries accept them (the GPU tests
// check each dtype's result against the CPU).
void BatchNorm2dCuda::choose_fused_operation(bool with_residual) {
  Impl& d = *impl_;
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const bool relu = options_.fuse_relu || with_residual;
  const cudnnBatchNormOps_t wanted = with_residual ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
                                     : relu        ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION
                                                   : CUDNN_BATCHNORM_OPS_BN;
  struct Candidate {
    cudnnBatchNormMode_t mode;
    cudnnBatchNormOps_t ops;
  };
  std::vector<Candidate> candidates;
  if (wanted != CUDNN_BATCHNORM_OPS_BN) candidates.push_back({CUDNN_BATCHNORM_SPATIAL_PERSISTENT, wanted});
  if (!with_residual) {  // a sum cuDNN does not fuse stays the block's own Add and ReLU
    candidates.push_back({CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN});
    candidates.push_back({CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN});
  }
  for (const Candidate& c : candidates) {
    cuda::check_cudnn(cudnnDeriveBNTensorDescriptor(d.bn.get(), d.x.get(), c.mode), "cudnnDeriveBNTensorDescriptor");
    std::size_t forward = 0, backward = 0, reserve = 0;
    if (!ex_supported(handle, c.mode, c.ops, d.x, d.bn, d.relu.get(), &forward, &backward, &reserve)) continue;
    d.mode = c.mode;
    d.ops = c.ops;
    d.reserve_bytes = reserve;
    if (training_) {
      const bool plans_workspace = ctx_.planned_backward && ctx_.lean_plan;
      d.forward_workspace.configure(ctx_, forward, plans_workspace);
      d.backward_workspace.configure(ctx_, backward, plans_workspace);
      const MemoryPurposeScope purpose(MemoryPurpose::kBatchNormReserve);
      if (reserve > 0) reserve_.reserve(plain_src_.device, reserve);
    }
    return;
  }
  if (with_residual) {  // not fused: back to the first choice without the sum
    choose_fused_operation(false);
    return;
  }
  throw std::runtime_error("BatchNorm2d " + name_ + ": cuDNN takes no batch normalization of " + plain_src_.str());
}

bool BatchNorm2dCuda::fuse_residual_add_relu(const TensorDesc& shortcut) {
  if (!native_nhwc_ || options_.fuse_relu || shortcut != plain_src_) return false;
  choose_fused_operation(true);
  residual_fused_ = impl_->ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  if (residual_fused_ && training_) {
    diff_residual_ = {shortcut, nullptr};
    diff_z_.configure(shortcut.device, shortcut.nbytes(), ctx_.planned_backward);
  }
  return residual_fused_;
}

// Both convolutions build their folded passes first (cudnn_fusion_cuda.hpp); either refusing
// leaves all three as they were configured.
std::string BatchNorm2dCuda::fold_between(Layer& before, Layer& after) {
  folded_ = false;
  const DType dtype = plain_src_.dtype;
  if (!native_nhwc_ || dtype == DType::kF32)
    return "folding is built for NHWC 16-bit activations (channels_last, amp-fp16 or amp-bf16), not " +
           plain_src_.str();
  if (!options_.fuse_relu) return "only a BatchNorm followed by its ReLU folds (the convolution after applies both)";
  auto* conv_before = dynamic_cast<Conv2dCuda*>(&before);
  auto* conv_after = dynamic_cast<Conv2dCuda*>(&after);
  if (conv_before == nullptr || conv_after == nullptr) return "it does not sit between two convolutions";
  reserve_fold_state();
  fold_.dbn_coefficients.reserve(plain_src_.device, 3 * static_cast<std::size_t>(options_.channels) * sizeof(float));
  // Evaluation normalises with the running statistics: the convolution before sums nothing.
  if (std::string why = training_ ? conv_before->fold_statistics_of(*this) : ""; !why.empty()) return why;
  if (std::string why = conv_after->fold_input_batchnorm(*this); !why.empty()) {
    if (training_) conv_before->unfold_statistics();
    return why;
  }
  folded_ = true;
  // Its output is its input: nothing of its own to hold (planned: never bound, never allocated).
  dst_.configure(plain_src_.device, plain_src_.nbytes(), /*planned=*/true);
  return "";
}

// Why this layer cannot fold with the block's sum after `before`, or "" (the conditions both
// folds with the sum share).
std::string BatchNorm2dCuda::residual_fold_obstacle(Layer& before) const {
  if (!training_) return "in evaluation the BatchNorm with the block's sum is one pass already";
  const DType dtype = plain_src_.dtype;
  if (!native_nhwc_ || dtype == DType::kF32)
    return "folding is built for NHWC 16-bit activations (channels_last, amp-fp16 or amp-bf16), not " +
           plain_src_.str();
  if (dynamic_cast<Conv2dCuda*>(&before) == nullptr) return "no convolution before it";
  return "";
}

// The graph of the backward first (cuDNN may build none for the shape), then the statistics from
// the convolution before; either refusing leaves both as they were configured. Then our kernel
// runs forward and the graph backward: cuDNN's fused BatchNorm's workspaces and reserve go.
std::string BatchNorm2dCuda::fold_statistics_and_backward(Layer& before, cuda::FusedPass pass) {
  const DType dtype = plain_src_.dtype;
  const Shape& x = plain_src_.shape;
  cuda::FusedConvShape shape;
  shape.n = x[0], shape.c = x[1], shape.h = x[2], shape.w = x[3];
  shape.k = x[1], shape.r = 1;  // not a convolution: the activations' shape alone
  shape.dtype = dtype;
  cuda::FusedConvOptions options;
  options.deterministic = ctx_.rules.deterministic;
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const cuda::FusedConvGraph> graph = cuda::fused_conv_graph(ctx_, pass, shape, options);
  ctx_.batchnorm_folding.build_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!graph->built())
    return std::string("cuDNN builds no batchnorm backward") +
           (pass == cuda::FusedPass::kResidualBatchNormBackward ? " through the ReLU's mask" : "") + " (" +
           graph->error() + ")";
  reserve_fold_state();  // the finalize writes scale and bias too (unused by these folds)
  if (std::string why = dynamic_cast<Conv2dCuda&>(before).fold_statistics_of(*this); !why.empty()) return why;
  impl_->folded_backward = std::move(graph);
  const bool plans_workspace = ctx_.planned_backward && ctx_.lean_plan;
  impl_->forward_workspace.reset();
  impl_->backward_workspace.configure(ctx_, impl_->folded_backward->workspace_bytes(), plans_workspace);
  reserve_.release();
  impl_->reserve_bytes = 0;
  return "";
}

std::string BatchNorm2dCuda::fold_with_residual_after(Layer& before) {
  residual_folded_ = false;
  impl_->folded_backward = nullptr;
  folded_shortcut_ = nullptr;
  if (!residual_fused_) return "the block's sum and ReLU are not fused into it";
  if (std::string why = residual_fold_obstacle(before); !why.empty()) return why;
  if (std::string why = fold_statistics_and_backward(before, cuda::FusedPass::kResidualBatchNormBackward);
      !why.empty())
    return why;
  residual_folded_ = true;
  relu_bits_.reserve(plain_src_.device, static_cast<std::size_t>((plain_src_.numel() + 7) / 8));
  return "";
}

std::string BatchNorm2dCuda::fold_into_residual_of(Layer& before, BatchNorm2d& last) {
  shortcut_folded_ = false;
  impl_->folded_backward = nullptr;
  auto* last_cuda = dynamic_cast<BatchNorm2dCuda*>(&last);
  if (last_cuda == nullptr || !last_cuda->residual_folded_)
    return "the branch's last BatchNorm did not fold with the block's sum";
  if (options_.fuse_relu) return "a shortcut's BatchNorm with a ReLU of its own does not fold";
  if (plain_src_ != last_cuda->plain_src_) return "its output is not the branch's shape";
  if (std::string why = residual_fold_obstacle(before); !why.empty()) return why;
  if (std::string why = fold_statistics_and_backward(before, cuda::FusedPass::kBatchNormBackward); !why.empty())
    return why;
  shortcut_folded_ = true;
  last_cuda->folded_shortcut_ = this;
  // Its output is its input, normalised as the last BatchNorm's pass reads it: never stored.
  dst_.configure(plain_src_.device, plain_src_.nbytes(), /*planned=*/true);
  return "";
}

const TensorRef& BatchNorm2dCuda::forward(const TensorRef& src) {
  Impl& d = *impl_;
  if (folded_ && !training_) {  // the running statistics, applied by the convolution after
    cuda::batchnorm_fold_inference(plain_src_.dtype, running_mean_->value.data<float>(),
                                   running_var_->value.data<float>(), weight_->value.data<float>(),
                                   bias_->value.data<float>(), options_.eps, fold_.scale.get(), fold_.bias.get(),
                                   options_.channels, cuda::stream_of(ctx_));
    out_.data = src.data;
    return out_;
  }
  if (folded_ || shortcut_folded_) {  // the statistics the convolution before summed; the layer after applies them
    finalize_folded_statistics();
    x_plain_ = src.data;
    out_.data = src.data;
    return out_;
  }
  if (residual_folded_) {  // the statistics the convolution before summed, the sum and ReLU in one pass
    if (residual_ == nullptr)
      throw std::logic_error("BatchNorm2d " + name_ + ": forward without the residual it fuses");
    finalize_folded_statistics();
    x_plain_ = src.data;
    out_.data = dst_.get();
    const cuda::FoldedStatistics shortcut =
        folded_shortcut_ != nullptr ? folded_shortcut_->folded_statistics() : cuda::FoldedStatistics{};
    cuda::batchnorm_fold_residual_output(plain_src_.dtype, x_plain_, residual_, folded_statistics(), shortcut,
                                         out_.data, relu_bits_.as<uint8_t>(), options_.channels, plain_src_.numel(),
                                         cuda::stream_of(ctx_));
    return out_;
  }
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const float one = 1.0f, zero = 0.0f;
  x_plain_ = src_to_plain_.convert(ctx_, src).data;
  out_.data = dst_.get();
  void* y = out_.data;
  const DType dtype = plain_src_.dtype;
  const int64_t n = plain_src_.numel();
  cudaStream_t stream = cuda::stream_of(ctx_);
  if (residual_fused_ && residual_ == nullptr)
    throw std::logic_error("BatchNorm2d " + name_ + ": forward without the residual it fuses");
  // Arena views are re-read every call: the store may rebind its arenas.
  if (!training_) {
    if (native_nhwc_) {
      cuda::batchnorm_inference_nhwc(dtype, x_plain_, residual_fused_ ? residual_ : nullptr, y,
                                     weight_->value.data<float>(), bias_->value.data<float>(),
                                     running_mean_->value.data<float>(), running_var_->value.data<float>(),
                                     options_.eps, options_.channels, n, options_.fuse_relu || residual_fused_, stream);
      return out_;
    }
    cuda::check_cudnn(cudnnBatchNormalizationForwardInference(
                          handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), x_plain_, d.x.get(), y, d.bn.get(),
                          weight_->value.raw(), bias_->value.raw(), running_mean_->value.raw(),
                          running_var_->value.raw(), options_.eps),
                      "cudnnBatchNormalizationForwardInference");
    if (options_.fuse_relu) cuda::relu_in_place(dtype, y, n, stream);
    return out_;
  }
  if (native_nhwc_) {
    forward_native();
  } else {
    // exponentialAverageFactor = momentum: running = factor * batch + (1 - factor) * running,
    // the CPU twin's update_running_stats_host, with the unbiased batch variance.
    cuda::check_cudnn(cudnnBatchNormalizationForwardTraining(
                          handle, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), x_plain_, d.x.get(), y, d.bn.get(),
                          weight_->value.raw(), bias_->value.raw(), static_cast<double>(options_.momentum),
                          running_mean_->value.raw(), running_var_->value.raw(), options_.eps, save_mean_.get(),
                          save_inv_var_.get()),
                      "cudnnBatchNormalizationForwardTraining");
  }
  if (options_.fuse_relu && d.ops == CUDNN_BATCHNORM_OPS_BN)
    cuda::relu_in_place_with_mask(dtype, y, relu_mask_.as<uint8_t>(), n, stream);
  return out_;
}

// The batch statistics from the sums the convolution before wrote, the running statistics, and
// the scale and bias a convolution after applies (folded_).
void BatchNorm2dCuda::reserve_fold_state() {
  const Device& device = plain_src_.device;
  const std::size_t channels = static_cast<std::size_t>(options_.channels);
  fold_.sum.reserve(device, channels * sizeof(float));
  fold_.sq_sum.reserve(device, channels * sizeof(float));
  fold_.scale.reserve(device, channels * dtype_size(plain_src_.dtype));
  fold_.bias.reserve(device, channels * dtype_size(plain_src_.dtype));
}

void BatchNorm2dCuda::finalize_folded_statistics() {
  const Shape& x = plain_src_.shape;
  cuda::batchnorm_fold_finalize(plain_src_.dtype, fold_.sum.as<const float>(), fold_.sq_sum.as<const float>(),
                                x[0] * x[2] * x[3], weight_->value.data<float>(), bias_->value.data<float>(),
                                options_.eps, options_.momentum, running_mean_->value.data<float>(),
                                running_var_->value.data<float>(), save_mean_.as<float>(), save_inv_var_.as<float>(),
                                fold_.scale.get(), fold_.bias.get(), options_.channels, cuda::stream_of(ctx_));
}

cuda::FoldedStatistics BatchNorm2dCuda::folded_statistics() const {
  return {save_mean_.as<const float>(), save_inv_var_.as<const float>(), weight_->value.data<float>(),
          bias_->value.data<float>()};
}

void BatchNorm2dCuda::forward_native() {
  Impl& d = *impl_;
  const float one = 1.0f, zero = 0.0f;
  const bool add = d.ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  const cuda::Workspace ws = d.forward_workspace.get(ctx_);
  cuda::check_cudnn(
      cudnnBatchNormalizationForwardTrainingEx(
          cuda::cudnn_handle(ctx_), d.mode, d.ops, &one, &zero, d.x.get(), x_plain_, add ? d.x.get() : nullptr,
          add ? residual_ : nullptr, d.x.get(), out_.data, d.bn.get(), weight_->value.raw(), bias_->value.raw(),
          static_cast<double>(options_.momentum), running_mean_->value.raw(), running_var_->value.raw(), options_.eps,
          save_mean_.get(), save_inv_var_.get(), d.ops == CUDNN_BATCHNORM_OPS_BN ? nullptr : d.relu.get(), ws.data,
          ws.bytes, reserve_.get(), d.reserve_bytes),
      "cudnnBatchNormalizationForwardTrainingEx");
}

const TensorRef& BatchNorm2dCuda::backward(const TensorRef& diff_dst) {
  if (!training_) throw std::logic_error("BatchNorm2d " + name_ + ": backward after inference forward");
  if (folded_) {  // diff_dst: the pre-activation's gradient; the weight gradients are written
    grads_ready();
    if (!needs_input_grad_) return none_;
    const Shape& x = plain_src_.shape;
    void* dx = diff_src_plain_.get();
    cuda::batchnorm_fold_input_grad(plain_src_.dtype, diff_dst.data, x_plain_, weight_->grad.data<float>(),
                                    bias_->grad.data<float>(), save_mean_.as<const float>(),
                                    save_inv_var_.as<const float>(), weight_->value.data<float>(),
                                    x[0] * x[2] * x[3], dx, options_.channels, plain_src_.numel(),
                                    cuda::stream_of(ctx_));
    diff_src_.data = dx;
    return diff_src_;
  }
  if (residual_folded_ || shortcut_folded_) {
    // cuDNN's batchnorm backward graph: the last BatchNorm's through the ReLU's mask, writing z's
    // gradient too (the block reports its weight gradients); a shortcut's given z's gradient.
    void* dx = diff_src_plain_.get();
    std::unordered_map<std::string, void*> tensors{{"dy", const_cast<void*>(diff_dst.data)},
                                                   {"x", const_cast<void*>(x_plain_)},
                                                   {"scale", weight_->value.raw()},
                                                   {"mean", save_mean_.get()},
                                                   {"inv_std", save_inv_var_.get()},
                                                   {"dx", dx},
                                                   {"dscale", weight_->grad.raw()},
                                                   {"dbias", bias_->grad.raw()}};
    if (residual_folded_) {
      diff_residual_.data = diff_z_.get();
      tensors["mask"] = relu_bits_.get();
      tensors["dz"] = diff_residual_.data;
    }
    const cuda::Workspace ws = impl_->backward_workspace.get(ctx_);
    impl_->folded_backward->execute(cuda::cudnn_handle(ctx_), tensors, ws.data, "BatchNorm2d " + name_ + " backward");
    if (!residual_fused_) grads_ready();
    if (!needs_input_grad_) return none_;
    diff_src_.data = diff_src_out_.convert(ctx_, {plain_src_, dx}).data;
    return diff_src_;
  }
  Impl& d = *impl_;
  const float one = 1.0f, zero = 0.0f;
  const void* g = diff_dst.data;  // plain: the layout configure promised for the output
  if (options_.fuse_relu && d.ops == CUDNN_BATCHNORM_OPS_BN) {
    void* diff_pre_relu = diff_pre_relu_.get();
    cuda::relu_backward_from_mask(plain_src_.dtype, relu_mask_.as<const uint8_t>(), g, diff_pre_relu,
                                  plain_src_.numel(), cuda::stream_of(ctx_));
    g = diff_pre_relu;
  }
  void* dx = diff_src_plain_.get();
  if (native_nhwc_) {
    backward_native(g, dx);
  } else {
    // alpha/beta for the data gradient and for the parameter gradients: 1 and 0, overwrite.
    cuda::check_cudnn(cudnnBatchNormalizationBackward(cuda::cudnn_handle(ctx_), CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                      &one, &zero, d.x.get(), x_plain_, d.x.get(), g, d.x.get(),
                                                      dx, d.bn.get(), weight_->value.raw(),
                                                      weight_->grad.raw(), bias_->grad.raw(), options_.eps,
                                                      save_mean_.get(), save_inv_var_.get()),
                      "cudnnBatchNormalizationBackward");
  }
  if (!residual_fused_) grads_ready();  // else the block reports them after its shortcut's
  if (!needs_input_grad_) return none_;
  diff_src_.data = diff_src_out_.convert(ctx_, {plain_src_, dx}).data;
  return diff_src_;
}

void BatchNorm2dCuda::backward_native(const void* diff_dst, void* diff_src) {
  Impl& d = *impl_;
  const float one = 1.0f, zero = 0.0f;
  const bool add = d.ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  const cuda::Workspace ws = d.backward_workspace.get(ctx_);
  if (add) diff_residual_.data = diff_z_.get();
  // Without an activation cuDNN reads no output (PyTorch passes none either); a lean plan has
  // already given that memory to another buffer.
  const bool keeps_output = keeps_output_for_backward();
  cuda::check_cudnn(
      cudnnBatchNormalizationBackwardEx(
          cuda::cudnn_handle(ctx_), d.mode, d.ops, &one, &zero, &one, &zero, d.x.get(), x_plain_,
          keeps_output ? d.x.get() : nullptr, keeps_output ? out_.data : nullptr, d.x.get(), diff_dst, add ? d.x.get() : nullptr, add ? diff_residual_.data : nullptr, d.x.get(),
          diff_src, d.bn.get(), weight_->value.raw(), bias_->value.raw(), weight_->grad.raw(),
          bias_->grad.raw(), options_.eps, save_mean_.get(), save_inv_var_.get(),
          d.ops == CUDNN_BATCHNORM_OPS_BN ? nullptr : d.relu.get(), ws.data, ws.bytes, reserve_.get(),
          d.reserve_bytes),
      "cudnnBatchNormalizationBackwardEx");
}

// forward reads x and, with the sum fused, z.
GradientPlan::Buffer* BatchNorm2dCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  if (folded_ || shortcut_folded_) {  // the output is the input; backward reads the input
    saved_ = {src, nullptr};
    plan.next();
    return src;
  }
  if (residual_fused_) plan.read(planned_residual_);
  saved_ = {src, dst_.write(plan)};
  impl_->forward_workspace.plan(plan);
  plan.next();
  return saved_.out;
}

// backward in one operation, reading x and (cuDNN's fused ReLU's gate) y. The input gradient is
// written even when not needed (see backward); z's gradient, when the sum is fused, outlives
// it until the block's shortcut reads it (planned_residual_grad).
GradientPlan::Buffer* BatchNorm2dCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  if (folded_) {  // one pass: reads the pre-activation's gradient and x, writes dx
    saved_.read(plan, false);
    GradientPlan::Buffer* dx = needs_input_grad_ ? diff_src_plain_.write(plan) : nullptr;
    plan.next();
    return dx;
  }
  saved_.read(plan, keeps_output_for_backward());
  if (options_.fuse_relu && impl_->ops == CUDNN_BATCHNORM_OPS_BN) diff_pre_relu_.write(plan);
  GradientPlan::Buffer* dx = diff_src_plain_.write(plan);
  planned_residual_grad_ = residual_fused_ ? diff_z_.write(plan) : nullptr;
  GradientPlan::Buffer* diff_src = needs_input_grad_ ? diff_src_out_.plan(plan, dx) : nullptr;
  impl_->backward_workspace.plan(plan);
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
