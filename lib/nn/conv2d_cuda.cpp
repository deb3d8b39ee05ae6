// Conv2dCuda (conv2d_cuda.hpp) on cuDNN.
#include "nn/conv2d_cuda.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/cudnn_cuda.hpp"
#include "nn/relu_kernels_cuda.hpp"

namespace sdp::nn {

namespace {

// The algorithms of one input shape and the workspace the largest of them needs.
struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  std::size_t workspace_bytes = 0;
};

// A candidate needing more workspace than this is passed over (FFT algorithms can ask for
// gigabytes on large maps).
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{512} << 20;

// Among cuDNN's ranked candidates (fastest first by its heuristics): the first that is
// supported, fits kMaxWorkspaceBytes, is deterministic (same bits every run, like the CPU)
// and not on TF32 tensor cores; failing a deterministic one, the first supported one.
template <class Perf>
const Perf& pick(const Perf* perf, int count, const std::string& what) {
  const Perf* fallback = nullptr;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspaceBytes) continue;
    if (perf[i].mathType == CUDNN_TENSOR_OP_MATH || perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
      continue;
    if (perf[i].determinism == CUDNN_DETERMINISTIC) return perf[i];
    if (fallback == nullptr) fallback = &perf[i];
  }
  if (fallback == nullptr) throw RuntimeError(what + ": cuDNN offers no f32 algorithm for this shape");
  return *fallback;
}

}  // namespace

struct Conv2dCuda::Impl {
  cuda::TensorDescriptor x, y, bias;
  cuda::FilterDescriptor w;
  cuda::ConvolutionDescriptor conv;
  std::map<Shape, ConvAlgorithms> cache;  // by plain input shape
  ConvAlgorithms algos;
};

Conv2dCuda::Conv2dCuda(Context& ctx, std::string name, const Conv2dOptions& options)
    : Conv2d(ctx, std::move(name), options), impl_(std::make_unique<Impl>()) {}

Conv2dCuda::~Conv2dCuda() = default;

TensorDesc Conv2dCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "Conv2d " + name_);
  const Conv2dOptions& o = options_;
  const Shape out = output_shape(src.shape);
  training_ = training;
  const Device& device = src.device;
  plain_src_ = TensorDesc::plain(src.shape, device);
  plain_dst_ = TensorDesc::plain(out, device);
  TensorDesc dst = plain_dst_;
  if (o.channels_last) dst.layout = Layout::kChannelsLast;
  src_to_plain_.configure(src, plain_src_);
  dst_out_.configure(plain_dst_, dst);
  out_ = {dst, nullptr};
  dst_plain_.reserve(device, plain_dst_.nbytes());
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};

  Impl& d = *impl_;
  d.x.set_nchw(src.shape);
  d.y.set_nchw(out);
  d.w.set_oihw(o.out_channels, o.in_channels, o.kernel, o.kernel);
  d.conv.set(o.padding, o.stride);
  if (o.bias) d.bias.set_channels(o.out_channels);
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  auto cached = d.cache.find(src.shape);
  if (cached == d.cache.end()) {
    ConvAlgorithms a;
    const std::string what = "Conv2d " + name_;
    int count = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cuda::check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fwd),
                      "cudnnGetConvolutionForwardAlgorithm_v7");
    a.forward = pick(fwd, count, what).algo;
    std::size_t bytes = 0;
    cuda::check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(handle, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                              a.forward, &bytes),
                      "cudnnGetConvolutionForwardWorkspaceSize");
    a.workspace_bytes = bytes;
    cudnnConvolutionBwdFilterAlgoPerf_t bwf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    cuda::check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, d.x.get(), d.y.get(), d.conv.get(),
                                                                    d.w.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                                    &count, bwf),
                      "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    a.backward_filter = pick(bwf, count, what).algo;
    cuda::check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, d.x.get(), d.y.get(), d.conv.get(),
                                                                     d.w.get(), a.backward_filter, &bytes),
                      "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    a.workspace_bytes = std::max(a.workspace_bytes, bytes);
    cudnnConvolutionBwdDataAlgoPerf_t bwd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cuda::check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, d.w.get(), d.y.get(), d.conv.get(),
                                                                  d.x.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                                  &count, bwd),
                      "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    a.backward_data = pick(bwd, count, what).algo;
    cuda::check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d.w.get(), d.y.get(), d.conv.get(),
                                                                   d.x.get(), a.backward_data, &bytes),
                      "cudnnGetConvolutionBackwardDataWorkspaceSize");
    a.workspace_bytes = std::max(a.workspace_bytes, bytes);
    cached = d.cache.emplace(src.shape, a).first;
  }
  d.algos = cached->second;
  cuda::reserve_cudnn_workspace(ctx_, d.algos.workspace_bytes);

  if (training) {
    diff_dst_to_plain_.configure(dst, plain_dst_);
    if (o.fuse_relu) diff_pre_relu_.reserve(device, plain_dst_.nbytes());
    if (needs_input_grad_) {
      diff_src_plain_.reserve(device, plain_src_.nbytes());
      diff_src_out_.configure(plain_src_, src);
    }
  }
  return dst;
}

const TensorRef& Conv2dCuda::forward(const TensorRef& src) {
  Impl& d = *impl_;
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const cuda::Workspace ws = cuda::cudnn_workspace(ctx_);
  const float one = 1.0f, zero = 0.0f;
  x_plain_ = src_to_plain_.convert(ctx_, src).data;
  float* y = dst_plain_.as<float>();
  // Arena views are re-read every call: the store may rebind its arenas.
  cuda::check_cudnn(cudnnConvolutionForward(handle, &one, d.x.get(), x_plain_, d.w.get(), weight_->value.raw(),
                                            d.conv.get(), d.algos.forward, ws.data, ws.bytes, &zero, d.y.get(), y),
                    "cudnnConvolutionForward");
  if (bias_)
    cuda::check_cudnn(cudnnAddTensor(handle, &one, d.bias.get(), bias_->value.raw(), &one, d.y.get(), y),
                      "cudnnAddTensor");
  if (options_.fuse_relu) cuda::relu_in_place(y, plain_dst_.numel(), cuda::stream_of(ctx_));
  out_.data = dst_out_.convert(ctx_, {plain_dst_, y}).data;
  return out_;
}

const TensorRef& Conv2dCuda::backward(const TensorRef& diff_dst) {
  if (!training_) throw std::logic_error("Conv2d " + name_ + ": backward after inference forward");
  Impl& d = *impl_;
  cudnnHandle_t handle = cuda::cudnn_handle(ctx_);
  const cuda::Workspace ws = cuda::cudnn_workspace(ctx_);
  const float one = 1.0f, zero = 0.0f;
  const void* g = diff_dst_to_plain_.convert(ctx_, diff_dst).data;
  if (options_.fuse_relu) {
    // ReLU'(pre-activation) == (output > 0): the plain output of forward is all it needs.
    cuda::relu_backward_from_output(dst_plain_.as<const float>(), static_cast<const float*>(g),
                                    diff_pre_relu_.as<float>(), plain_dst_.numel(), cuda::stream_of(ctx_));
    g = diff_pre_relu_.get();
  }
  // Weight gradient first so the hook can start reducing it while the input gradient runs;
  // beta = 0 overwrites it, as the Layer contract says.
  cuda::check_cudnn(cudnnConvolutionBackwardFilter(handle, &one, d.x.get(), x_plain_, d.y.get(), g, d.conv.get(),
                                                   d.algos.backward_filter, ws.data, ws.bytes, &zero, d.w.get(),
                                                   weight_->grad.raw()),
                    "cudnnConvolutionBackwardFilter");
  if (bias_)
    cuda::check_cudnn(cudnnConvolutionBackwardBias(handle, &one, d.y.get(), g, &zero, d.bias.get(), bias_->grad.raw()),
                      "cudnnConvolutionBackwardBias");
  grads_ready();

  if (!needs_input_grad_) return none_;
  cuda::check_cudnn(cudnnConvolutionBackwardData(handle, &one, d.w.get(), weight_->value.raw(), d.y.get(), g,
                                                 d.conv.get(), d.algos.backward_data, ws.data, ws.bytes, &zero,
                                                 d.x.get(), diff_src_plain_.get()),
                    "cudnnConvolutionBackwardData");
  diff_src_.data = diff_src_out_.convert(ctx_, {plain_src_, diff_src_plain_.get()}).data;
  return diff_src_;
}

GradientPlan::Buffer* Conv2dCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  plan.next();
  return nullptr;
}

}  // namespace sdp::nn
