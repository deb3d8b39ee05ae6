// Conv2dCuda (conv2d_cuda.hpp) on cuDNN.
#include "nn/conv2d_cuda.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "core/cuda_casts.hpp"
#include "core/error.hpp"
#include "nn/channel_sum_cuda.hpp"
#include "nn/channels_last_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/cudnn_cuda.hpp"
#include "nn/conv_algorithm_choices.hpp"
#include "nn/cudnn_fusion_cuda.hpp"
#include "nn/relu_kernels_cuda.hpp"

namespace sdp::nn {

namespace {

// The algorithms of one input shape and the workspace each pass needs (backward: the larger of
// its filter and data gradients', which run one after the other).
struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  std::size_t forward_workspace_bytes = 0;
  std::size_t backward_workspace_bytes = 0;
};

// Among cuDNN's candidates (fastest first: by its heuristics, or as it timed them): the first
// that is supported, fits the rules' workspace limit (FFT algorithms can ask for gigabytes on
// large maps) and, for f32 data without TF32, is not on tensor cores; under the deterministic
// rule the first deterministic one (the same bits every run, like the CPU), failing which the
// first supported one. f16/bf16 data (mixed precision) takes tensor-core candidates.
template <class Perf>
const Perf& pick(const Perf* perf, int count, DType dtype, const ComputeRules& rules, const std::string& what) {
  const Perf* fallback = nullptr;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > rules.workspace_limit) continue;
    if (dtype == DType::kF32 && !rules.tf32 &&
        (perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    if (!rules.deterministic || perf[i].determinism == CUDNN_DETERMINISTIC) return perf[i];
    if (fallback == nullptr) fallback = &perf[i];
  }
  if (fallback == nullptr)
    throw RuntimeError(what + ": cuDNN offers no " + dtype_name(dtype) + " algorithm for this shape within " +
                       std::to_string(rules.workspace_limit >> 20) + " MB of workspace (train.cudnn_workspace_mb)");
  return *fallback;
}

// The three algorithms of one shape (see pick) and the workspace the largest of them needs:
// ranked by cuDNN's heuristics (cudnnGet*_v7), or timed by cuDNN on this GPU (cudnnFind*, which
// runs each candidate once on memory it allocates itself) under rules.measure_algorithms.
ConvAlgorithms choose_algorithms(cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                 cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, DType dtype,
                                 const ComputeRules& rules, const std::string& what) {
  ConvAlgorithms a;
  int count = 0;
  std::size_t bytes = 0;
  const bool find = rules.measure_algorithms;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  cuda::check_cudnn(find ? cudnnFindConvolutionForwardAlgorithm(handle, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                                 &count, fwd)
                         : cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y,
                                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fwd),
                    find ? "cudnnFindConvolutionForwardAlgorithm" : "cudnnGetConvolutionForwardAlgorithm_v7");
  a.forward = pick(fwd, count, dtype, rules, what).algo;
  cuda::check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, a.forward, &bytes),
                    "cudnnGetConvolutionForwardWorkspaceSize");
  a.forward_workspace_bytes = bytes;
  cudnnConvolutionBwdFilterAlgoPerf_t bwf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  cuda::check_cudnn(find ? cudnnFindConvolutionBackwardFilterAlgorithm(
                               handle, x, y, conv, w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, bwf)
                         : cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                               handle, x, y, conv, w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, bwf),
                    find ? "cudnnFindConvolutionBackwardFilterAlgorithm" : "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  a.backward_filter = pick(bwf, count, dtype, rules, what).algo;
  cuda::check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x, y, conv, w, a.backward_filter, &bytes),
                    "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  a.backward_workspace_bytes = bytes;
  cudnnConvolutionBwdDataAlgoPerf_t bwd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  cuda::check_cudnn(find ? cudnnFindConvolutionBackwardDataAlgorithm(
                               handle, w, y, conv, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, bwd)
                         : cudnnGetConvolutionBackwardDataAlgorithm_v7(
                               handle, w, y, conv, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, bwd),
                    find ? "cudnnFindConvolutionBackwardDataAlgorithm" : "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  a.backward_data = pick(bwd, count, dtype, rules, what).algo;
  cuda::check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, y, conv, x, a.backward_data, &bytes),
                    "cudnnGetConvolutionBackwardDataWorkspaceSize");
  a.backward_workspace_bytes = std::max(a.backward_workspace_bytes, bytes);
  return a;
}

// The algorithms cuDNN timed on this stream (train.conv_algorithms: measured), by everything a
// choice depends on (measured_shape_key): shared by the layers (a shape is timed once a job, not
// once a layer), seeded from rank 0 and from checkpoints (conv_algorithm_choices.hpp).
struct MeasuredAlgorithms {
  std::map<std::string, ConvAlgorithms> by_shape;
};

MeasuredAlgorithms& measured_algorithms(Context& ctx) {
  std::shared_ptr<void>& slot = cuda::stream_attachment(ctx, "conv_measured_algorithms");
  if (!slot) slot = std::make_shared<MeasuredAlgorithms>();
  return *static_cast<MeasuredAlgorithms*>(slot.get());
}

std::string measured_shape_key(const Shape& src, const Conv2dOptions& o, DType dtype, bool nhwc,
                               const ComputeRules& rules) {
  return std::to_string(src[0]) + "," + std::to_string(src[1]) + "," + std::to_string(src[2]) + "," +
         std::to_string(src[3]) + " k" + std::to_string(o.out_channels) + " r" + std::to_string(o.kernel) + " s" +
         std::to_string(o.stride) + " p" + std::to_string(o.padding) + " " + dtype_name(dtype) +
         (nhwc ? " nhwc" : " nchw") + (rules.tf32 ? " tf32" : "") + (rules.deterministic ? " deterministic" : " any") +
         " ws" + std::to_string(rules.workspace_limit);
}

// Where measured choices hold: this cuDNN on this GPU.
std::string measuring_library(Context& ctx) {
  cudaDeviceProp properties{};
  cuda::check(cudaGetDeviceProperties(&properties, ctx.device.index), "cudaGetDeviceProperties");
  return "cuDNN " + std::to_string(cudnnGetVersion()) + " on " + properties.name;
}

}  // namespace

std::string export_measured_conv_algorithms(Context& ctx) {
  const MeasuredAlgorithms& measured = measured_algorithms(ctx);
  if (measured.by_shape.empty()) return "";
  ConvAlgorithmChoices choices;
  choices.library = measuring_library(ctx);
  for (const auto& [shape, a] : measured.by_shape)
    choices.by_shape[shape] = {static_cast<int>(a.forward), static_cast<int>(a.backward_filter),
                               static_cast<int>(a.backward_data), a.forward_workspace_bytes,
                               a.backward_workspace_bytes};
  return format_conv_algorithm_choices(choices);
}

std::string import_measured_conv_algorithms(Context& ctx, const std::string& text, const std::string& what) {
  const ConvAlgorithmChoices choices = parse_conv_algorithm_choices(text, what);
  const std::string here = measuring_library(ctx);
  if (choices.library != here) return "they were measured with " + choices.library + ", this is " + here;
  MeasuredAlgorithms& measured = measured_algorithms(ctx);
  for (const auto& [shape, c] : choices.by_shape) {
    ConvAlgorithms a;
    a.forward = static_cast<cudnnConvolutionFwdAlgo_t>(c.forward);
    a.backward_filter = static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.backward_filter);
    a.backward_data = static_cast<cudnnConvolutionBwdDataAlgo_t>(c.backward_data);
    a.forward_workspace_bytes = static_cast<std::size_t>(c.forward_workspace);
    a.backward_workspace_bytes = static_cast<std::size_t>(c.backward_workspace);
    measured.by_shape[shape] = a;
  }
  return "";
}

// What the algorithms depend on: the input's shape, its dtype, NHWC or NCHW, and the rules
// (TF32, determinism, heuristics or measured, workspace limit).
using ConvKey = std::tuple<Shape, DType, bool, bool, bool, bool, std::size_t>;

struct Conv2dCuda::Impl {
  cuda::TensorDescriptor x, y, bias;
  cuda::FilterDescriptor w;
  cuda::ConvolutionDescriptor conv;
  std::map<ConvKey, ConvAlgorithms> cache;
  ConvAlgorithms algos;
  // Mixed precision: the f32 parameters cast to the compute dtype at each forward, and the
  // weight gradient in that dtype before it is widened into the f32 gradient arena.
  CudaBuffer weight_lp, bias_lp, weight_grad_lp;
  cuda::OperationWorkspace forward_workspace, backward_workspace;
  // Folded BatchNorms' passes (null: the legacy call): forward, input and filter gradient.
  std::shared_ptr<const cuda::FusedConvGraph> fused_forward, fused_input_grad, fused_filter_grad;
  // add_to_input_grad: the input gradient plus the residual block's other term.
  std::shared_ptr<const cuda::FusedConvGraph> summed_input_grad;
};

Conv2dCuda::Conv2dCuda(Context& ctx, std::string name, const Conv2dOptions& options)
    : Conv2d(ctx, std::move(name), options), impl_(std::make_unique<Impl>()) {}

Conv2dCuda::~Conv2dCuda() = default;

TensorDesc Conv2dCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "Conv2d " + name_);
  statistics_of_ = input_batchnorm_ = nullptr;  // the BatchNorms ask again after every configure
  impl_->fused_forward = impl_->fused_input_grad = impl_->fused_filter_grad = nullptr;
  adds_to_input_grad_ = false;  // and the block
  impl_->summed_input_grad = nullptr;
  input_grad_addend_ = nullptr;
  planned_addend_ = nullptr;
  const Conv2dOptions& o = options_;
  const Shape out = output_shape(src.shape);
  training_ = training;
  const Device& device = src.device;
  const DType dtype = src.dtype;
  native_nhwc_ = ctx_.channels_last && src.layout == Layout::kChannelsLast;
  // In the native layout "plain" names the layout the layer computes in: NHWC.
  plain_src_ = native_nhwc_ ? src : TensorDesc::plain(src.shape, device, dtype);
  plain_dst_ = TensorDesc::plain(out, device, dtype);
  if (native_nhwc_) plain_dst_.layout = Layout::kChannelsLast;
  TensorDesc dst = plain_dst_;
  if (o.channels_last) dst.layout = Layout::kChannelsLast;
  src_to_plain_.configure(src, plain_src_);
  dst_out_.configure(plain_dst_, dst);
  out_ = {dst, nullptr};
  // The output is planned when it is this buffer itself (no conversion after it).
  saved_ = {};
  dst_plain_.configure(device, plain_dst_.nbytes(), training && ctx_.planned_backward && !dst_out_.needed());
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};

  Impl& d = *impl_;
  if (native_nhwc_) {
    d.x.set_nhwc(src.shape, dtype);
    d.y.set_nhwc(out, dtype);
    d.w.set_ohwi(o.out_channels, o.in_channels, o.kernel, o.kernel, dtype);
  } else {
    d.x.set_nchw(src.shape, dtype);
    d.y.set_nchw(out, dtype);
    d.w.set_oihw(o.out_channels, o.in_channels, o.kernel, o.kernel, dtype);
  }
  const ComputeRules& rules = ctx_.rules;
  d.conv.set(o.padding, o.stride, dtype, rules.tf32);
  if (o.bias) d.bias.set_channels(o.out_channels, dtype);
  if (dtype != DType::kF32 || native_nhwc_) {
    const std::size_t element = dtype_size(dtype);
    d.weight_lp.reserve(device, static_cast<std::size_t>(weight_->value.numel()) * element);
    if (training) d.weight_grad_lp.reserve(device, static_cast<std::size_t>(weight_->value.numel()) * element);
    if (bias_ && dtype != DType::kF32) d.bias_lp.reserve(device, static_cast<std::size_t>(o.out_channels) * element);
  }
  const ConvKey key{src.shape,          dtype,
                    native_nhwc_,       rules.tf32,
                    rules.deterministic, rules.measure_algorithms,
                    rules.workspace_limit};
  if (rules.measure_algorithms) {  // the job's: timed once a shape, or as rank 0 or a checkpoint had them
    std::map<std::string, ConvAlgorithms>& measured = measured_algorithms(ctx_).by_shape;
    const std::string shape = measured_shape_key(src.shape, o, dtype, native_nhwc_, rules);
    auto at = measured.find(shape);
    if (at == measured.end())
      at = measured
               .emplace(shape, choose_algorithms(cuda::cudnn_handle(ctx_), d.x.get(), d.w.get(), d.conv.get(),
                                                 d.y.get(), dtype, rules, "Conv2d " + name_))
               .first;
    d.algos = at->second;
  } else {
    auto cached = d.cache.find(key);
    if (cached == d.cache.end())
      cached = d.cache
                   .emplace(key, choose_algorithms(cuda::cudnn_handle(ctx_), d.x.get(), d.w.get(), d.conv.get(),
                                                   d.y.get(), dtype, rules, "Conv2d " + name_))
                   .first;
    d.algos = cached->second;
  }
  const bool plans_workspace = training && ctx_.planned_backward && ctx_.lean_plan;
  d.forward_workspace.configure(ctx_, d.algos.forward_workspace_bytes, plans_workspace);
  if (training)
    d.backward_workspace.configure(ctx_, d.algos.backward_workspace_bytes, plans_workspace);
  else
    d.backward_workspace.reset();

  if (training) {
    const bool planned = ctx_.planned_backward;
    diff_dst_to_plain_.configure(dst, plain_dst_, planned);
    if (o.fuse_relu) diff_pre_relu_.configure(device, plain_dst_.nbytes(), planned);
    if (needs_input_grad_) {
      diff_src_plain_.configure(device, plain_src_.nbytes(), planned);
      diff_src_out_.configure(plain_src_, src, planned);
    }
  }
  return dst;
}

const TensorRef& Conv2dCuda::forward(const TensorRef& src) {
  Impl& d = *impl_;
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const cuda::Workspace ws = d.forward_workspace.get(ctx_);
  const float one = 1.0f, zero = 0.0f;
  x_plain_ = src_to_plain_.convert(ctx_, src).data;
  void* y = dst_plain_.get();
  cudaStream_t stream = cuda::stream_of(ctx_);
  const DType dtype = plain_dst_.dtype;
  // Arena views are re-read every call: the store may rebind its arenas. Under mixed
  // precision the weights are cast here, after the optimizer's last update.
  const void* w = weight_->value.raw();
  const void* b = bias_ ? bias_->value.raw() : nullptr;
  if (uses_weight_copy()) {
    const Conv2dOptions& o = options_;
    if (native_nhwc_)
      cuda::filter_to_ohwi(dtype, d.weight_lp.get(), weight_->value.data<float>(), o.out_channels, o.in_channels,
                           o.kernel, o.kernel, stream);
    else
      cuda_casts::from_f32(dtype, d.weight_lp.get(), weight_->value.data<float>(), weight_->value.numel(), 1.0f,
                           ctx_.stream.get());
    w = d.weight_lp.get();
  }
  if (dtype != DType::kF32) {
    if (bias_) {
      cuda_casts::from_f32(dtype, d.bias_lp.get(), bias_->value.data<float>(), bias_->value.numel(), 1.0f,
                           ctx_.stream.get());
      b = d.bias_lp.get();
    }
  }
  if (d.fused_forward) {
    std::unordered_map<std::string, void*> tensors{
        {"x", const_cast<void*>(x_plain_)}, {"w", const_cast<void*>(w)}, {"y", y}};
    if (input_batchnorm_ != nullptr) {
      tensors["scale"] = input_batchnorm_->fold_state().scale.get();
      tensors["bias"] = input_batchnorm_->fold_state().bias.get();
    }
    if (statistics_of_ != nullptr) {
      tensors["sum"] = statistics_of_->fold_state().sum.get();
      tensors["sq_sum"] = statistics_of_->fold_state().sq_sum.get();
    }
    d.fused_forward->execute(handle, tensors, ws.data, "Conv2d " + name_ + " forward");
  } else {
    cuda::check_cudnn(cudnnConvolutionForward(handle, &one, d.x.get(), x_plain_, d.w.get(), w, d.conv.get(),
                                              d.algos.forward, ws.data, ws.bytes, &zero, d.y.get(), y),
                      "cudnnConvolutionForward");
  }
  if (bias_)
    cuda::check_cudnn(cudnnAddTensor(handle, &one, d.bias.get(), b, &one, d.y.get(), y), "cudnnAddTensor");
  if (options_.fuse_relu) cuda::relu_in_place(dtype, y, plain_dst_.numel(), stream);
  out_.data = dst_out_.convert(ctx_, {plain_dst_, y}).data;
  return out_;
}

const TensorRef& Conv2dCuda::backward(const TensorRef& diff_dst) {
  if (!training_) throw std::logic_error("Conv2d " + name_ + ": backward after inference forward");
  Impl& d = *impl_;
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const cuda::Workspace ws = d.backward_workspace.get(ctx_);
  const float one = 1.0f, zero = 0.0f;
  const void* g = diff_dst_to_plain_.convert(ctx_, diff_dst).data;
  cudaStream_t stream = cuda::stream_of(ctx_);
  const DType dtype = plain_dst_.dtype;
  const bool low_precision = dtype != DType::kF32;
  if (options_.fuse_relu) {
    // ReLU'(pre-activation) == (output > 0): the plain output of forward is all it needs.
    void* diff_pre_relu = diff_pre_relu_.get();
    cuda::relu_backward_from_output(dtype, dst_plain_.get(), g, diff_pre_relu, plain_dst_.numel(), stream);
    g = diff_pre_relu;
  }
  // Weight gradient first so the hook can start reducing it while the input gradient runs;
  // beta = 0 overwrites it, as the Layer contract says. Mixed precision: cuDNN writes it in
  // the compute dtype (its convolutions take one data type) and it is widened into the arena.
  void* dw = uses_weight_copy() ? d.weight_grad_lp.get() : weight_->grad.raw();
  if (d.fused_filter_grad) {  // its input, the BatchNorm's output, recomputed as it loads
    d.fused_filter_grad->execute(handle,
                                 {{"x", const_cast<void*>(x_plain_)},
                                  {"dy", const_cast<void*>(g)},
                                  {"scale", input_batchnorm_->fold_state().scale.get()},
                                  {"bias", input_batchnorm_->fold_state().bias.get()},
                                  {"dw", dw}},
                                 ws.data, "Conv2d " + name_ + " filter gradient");
  } else {
    cuda::check_cudnn(cudnnConvolutionBackwardFilter(handle, &one, d.x.get(), x_plain_, d.y.get(), g, d.conv.get(),
                                                     d.algos.backward_filter, ws.data, ws.bytes, &zero, d.w.get(),
                                                     dw),
                      "cudnnConvolutionBackwardFilter");
  }
  if (native_nhwc_)
    cuda::filter_grad_to_oihw(dtype, weight_->grad.data<float>(), dw, options_.out_channels, options_.in_channels,
                              options_.kernel, options_.kernel, stream);
  else if (low_precision)
    cuda_casts::to_f32(dtype, weight_->grad.data<float>(), dw, weight_->grad.numel(), 1.0f, ctx_.stream.get());
  if (bias_) {
    const Shape& y = plain_dst_.shape;
    // cuDNN's bias gradient takes no bf16: 16-bit gradients are summed by our kernel, in f32
    // straight into the arena. NHWC is [N*H*W, C, 1] to it.
    if (native_nhwc_)
      cuda::channel_sums(dtype, g, bias_->grad.data<float>(), y[0] * y[2] * y[3], y[1], 1, stream);
    else if (low_precision)
      cuda::channel_sums(dtype, g, bias_->grad.data<float>(), y[0], y[1], y[2] * y[3], stream);
    else
      cuda::check_cudnn(cudnnConvolutionBackwardBias(handle, &one, d.y.get(), g, &zero, d.bias.get(), bias_->grad.raw()),
                        "cudnnConvolutionBackwardBias");
  }
  grads_ready();

  if (!needs_input_grad_) return none_;
  const void* w = uses_weight_copy() ? d.weight_lp.get() : weight_->value.raw();  // as forward saw it
  void* dx = diff_src_plain_.get();
  if (adds_to_input_grad_) {
    if (input_grad_addend_ == nullptr)
      throw std::logic_error("Conv2d " + name_ + ": backward without the input gradient's addend");
    d.summed_input_grad->execute(handle,
                                 {{"dy", const_cast<void*>(g)},
                                  {"w", const_cast<void*>(w)},
                                  {"dsum", const_cast<void*>(input_grad_addend_)},
                                  {"dx", dx}},
                                 ws.data, "Conv2d " + name_ + " input gradient with the block's sum");
  } else if (d.fused_input_grad) {
    // Through the BatchNorm's ReLU (dx is the gradient of its pre-activation), with its weight
    // gradients written into the arena and its f32 gamma and beta.
    BatchNorm2dCuda& bn = *input_batchnorm_;
    float* coefficients = bn.fold_state().dbn_coefficients.as<float>();
    const int64_t c = bn.channels();
    d.fused_input_grad->execute(handle,
                                {{"dy", const_cast<void*>(g)},
                                 {"w", const_cast<void*>(w)},
                                 {"x", const_cast<void*>(x_plain_)},
                                 {"mean", const_cast<float*>(bn.saved_mean())},
                                 {"inv_std", const_cast<float*>(bn.saved_inv_std())},
                                 {"scale", bn.weight().value.raw()},
                                 {"bias", bn.bias().value.raw()},
                                 {"drelu", dx},
                                 {"dscale", bn.weight().grad.raw()},
                                 {"dbias", bn.bias().grad.raw()},
                                 {"eq_scale_dy", coefficients},
                                 {"eq_scale_x", coefficients + c},
                                 {"eq_bias", coefficients + 2 * c}},
                                ws.data, "Conv2d " + name_ + " input gradient");
  } else {
    cuda::check_cudnn(cudnnConvolutionBackwardData(handle, &one, d.w.get(), w, d.y.get(), g, d.conv.get(),
                                                   d.algos.backward_data, ws.data, ws.bytes, &zero, d.x.get(), dx),
                      "cudnnConvolutionBackwardData");
  }
  diff_src_.data = diff_src_out_.convert(ctx_, {plain_src_, dx}).data;
  return diff_src_;
}

std::string Conv2dCuda::fold_statistics_of(BatchNorm2dCuda& bn) { return try_fold(statistics_of_, bn); }

std::string Conv2dCuda::fold_input_batchnorm(BatchNorm2dCuda& bn) { return try_fold(input_batchnorm_, bn); }

// A refusal leaves the passes that were built before (cached) in place.
std::string Conv2dCuda::try_fold(BatchNorm2dCuda*& slot, BatchNorm2dCuda& bn) {
  slot = &bn;
  std::string why = build_folded_passes();
  if (!why.empty()) {
    slot = nullptr;
    build_folded_passes();
  }
  return why;
}

void Conv2dCuda::unfold_statistics() {
  statistics_of_ = nullptr;
  build_folded_passes();
}

std::string Conv2dCuda::build_folded_passes() {
  Impl& d = *impl_;
  d.fused_forward = d.fused_input_grad = d.fused_filter_grad = nullptr;
  // The input gradient with the block's sum (add_to_input_grad) runs in the legacy passes' place.
  const std::size_t legacy_forward = d.algos.forward_workspace_bytes,
                    legacy_backward = std::max(d.algos.backward_workspace_bytes,
                                               d.summed_input_grad ? d.summed_input_grad->workspace_bytes() : 0);
  const bool plans_workspace = training_ && ctx_.planned_backward && ctx_.lean_plan;
  if (statistics_of_ == nullptr && input_batchnorm_ == nullptr) {
    d.forward_workspace.configure(ctx_, legacy_forward, plans_workspace);
    if (training_) d.backward_workspace.configure(ctx_, legacy_backward, plans_workspace);
    return "";
  }
  const std::string who = "Conv2d " + name_ + ": ";
  const Conv2dOptions& o = options_;
  const DType dtype = plain_src_.dtype;
  if (!training_ && statistics_of_ != nullptr) return who + "evaluation sums no statistics";
  if (!native_nhwc_ || dtype == DType::kF32) return who + "folding needs NHWC 16-bit activations";
  if (bias_ || o.fuse_relu) return who + "a convolution with a bias or its own ReLU does not fold";
  if (training_ && input_batchnorm_ != nullptr && !needs_input_grad_)
    return who + "the BatchNorm before it needs this convolution's input gradient pass";
  const cuda::FusedConvShape shape = fused_shape();
  cuda::FusedConvOptions options;
  options.input_batchnorm = input_batchnorm_ != nullptr;
  options.statistics = statistics_of_ != nullptr;
  options.deterministic = ctx_.rules.deterministic;
  const auto build = [&](cuda::FusedPass pass, const char* what,
                         std::shared_ptr<const cuda::FusedConvGraph>& into) -> std::string {
    cuda::FusedConvOptions pass_options = options;
    if (pass != cuda::FusedPass::kForward) pass_options.statistics = false;
    const auto start = std::chrono::steady_clock::now();
    std::shared_ptr<const cuda::FusedConvGraph> graph = cuda::fused_conv_graph(ctx_, pass, shape, pass_options);
    ctx_.batchnorm_folding.build_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!graph->built()) return who + "cuDNN builds no folded " + what + " (" + graph->error() + ")";
    into = std::move(graph);
    return "";
  };
  std::string why = build(cuda::FusedPass::kForward, "forward", d.fused_forward);
  if (why.empty() && input_batchnorm_ != nullptr && training_) {
    why = build(cuda::FusedPass::kInputGradient, "input gradient", d.fused_input_grad);
    if (why.empty()) why = build(cuda::FusedPass::kFilterGradient, "filter gradient", d.fused_filter_grad);
  }
  if (!why.empty()) {
    d.fused_forward = d.fused_input_grad = d.fused_filter_grad = nullptr;
    return why;
  }
  d.forward_workspace.configure(ctx_, std::max(legacy_forward, d.fused_forward->workspace_bytes()), plans_workspace);
  if (!training_) return "";
  std::size_t backward = legacy_backward;
  if (d.fused_input_grad) backward = std::max({backward, d.fused_input_grad->workspace_bytes(),
                                               d.fused_filter_grad->workspace_bytes()});
  d.backward_workspace.configure(ctx_, backward, plans_workspace);
  return "";
}

// This convolution as the cuDNN frontend graphs describe it (plain_src_ is NHWC 16-bit there).
cuda::FusedConvShape Conv2dCuda::fused_shape() const {
  const Conv2dOptions& o = options_;
  const Shape& x = plain_src_.shape;
  cuda::FusedConvShape shape;
  shape.n = x[0], shape.c = x[1], shape.h = x[2], shape.w = x[3];
  shape.k = o.out_channels, shape.r = o.kernel, shape.stride = o.stride, shape.padding = o.padding;
  shape.dtype = plain_src_.dtype;
  return shape;
}

// The graph of the input gradient plus the addend; the workspace grows to it.
std::string Conv2dCuda::add_to_input_grad() {
  Impl& d = *impl_;
  adds_to_input_grad_ = false;
  d.summed_input_grad = nullptr;
  const std::string who = "Conv2d " + name_ + ": ";
  if (!training_ || !needs_input_grad_) return who + "no input gradient to add to";
  if (!native_nhwc_ || plain_src_.dtype == DType::kF32)
    return who + "the sum in the pass needs NHWC 16-bit activations";
  if (input_batchnorm_ != nullptr) return who + "its input gradient pass goes through a folded BatchNorm";
  if (diff_src_out_.needed()) return who + "its input gradient changes layout after the pass";
  const cuda::FusedConvShape shape = fused_shape();
  cuda::FusedConvOptions options;
  options.add_to_input_grad = true;
  options.deterministic = ctx_.rules.deterministic;
  std::shared_ptr<const cuda::FusedConvGraph> graph =
      cuda::fused_conv_graph(ctx_, cuda::FusedPass::kInputGradient, shape, options);
  if (!graph->built()) return who + "cuDNN builds no input gradient with the sum (" + graph->error() + ")";
  d.summed_input_grad = std::move(graph);
  adds_to_input_grad_ = true;
  // The passes again (cached), the backward workspace now sized for the new graph too.
  if (std::string why = build_folded_passes(); !why.empty()) {
    adds_to_input_grad_ = false;
    d.summed_input_grad = nullptr;
    build_folded_passes();
    return why;
  }
  return "";
}

// A filter of its own: cast to the compute dtype, or reordered to OHWI for the NHWC kernels
// (f32 too), after each update; its gradient comes back the same way.
bool Conv2dCuda::uses_weight_copy() const { return plain_dst_.dtype != DType::kF32 || native_nhwc_; }

GradientPlan::Buffer* Conv2dCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  saved_ = {src, dst_out_.needed() ? nullptr : dst_plain_.write(plan)};
  impl_->forward_workspace.plan(plan);
  plan.next();
  return saved_.out;
}

// backward in one operation: every buffer it writes lives across all of it; it reads its
// input (the weight gradient) and, with a fused ReLU, its output (the ReLU's gate).
GradientPlan::Buffer* Conv2dCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  saved_.read(plan, options_.fuse_relu || !ctx_.lean_plan);  // the fused ReLU's gate
  diff_dst_to_plain_.plan(plan, diff_dst);
  if (options_.fuse_relu) diff_pre_relu_.write(plan);
  GradientPlan::Buffer* diff_src = nullptr;
  if (adds_to_input_grad_) plan.read(planned_addend_);  // the block's other term, read by the epilogue
  if (needs_input_grad_) diff_src = diff_src_out_.plan(plan, diff_src_plain_.write(plan));
  impl_->backward_workspace.plan(plan);
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
