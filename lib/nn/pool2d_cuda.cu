// Pool2dCuda (pool2d_cuda.hpp): max pooling kernels and cuDNN average pooling.
#include <cstring>
#include <initializer_list>
#include <stdexcept>

#include "nn/channels_last_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/cudnn_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/pool_rule.hpp"
#include "nn/pool2d_cuda.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {

// Indices in I (pool_rule.hpp's MaxPoolIndex): int32 when the input and output have fewer
// than 2^30 elements (the grid-stride sum stays in range), int64 otherwise.
constexpr int64_t kInt32Elements = int64_t{1} << 30;

// One thread per output element: max_pool_window (pool_rule.hpp).
template <class T, class I>
__global__ void max_pool_forward_kernel(MaxPoolGeometry g, const T* x, T* y, uint8_t* argmax, bool relu) {
  const I total = static_cast<I>(g.planes * g.oh * g.ow);
  for (I o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += gridDim.x * blockDim.x) {
    uint8_t at = kNoMaximum;
    y[o] = cuda::store_as<T>(max_pool_window<T, I>(g, x, o, relu, &at));
    if (argmax != nullptr) argmax[o] = at;
  }
}

// One thread per input element: max_pool_input_grad (pool_rule.hpp).
template <class T, class I>
__global__ void max_pool_backward_kernel(MaxPoolGeometry g, const T* y, const T* dy, const uint8_t* argmax, T* dx,
                                         bool relu) {
  const I total = static_cast<I>(g.planes * g.h * g.w);
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x)
    dx[i] = cuda::store_as<T>(max_pool_input_grad<T, I>(g, y, dy, argmax, i, relu));
}

// The NHWC kernels' V channels a thread (pool_rule.hpp's *_nhwc rules): 16 bytes of T.
template <class T>
constexpr int kVector = static_cast<int>(16 / sizeof(T));

template <class T>
struct LoadVector {
  __device__ __forceinline__ void operator()(const T* p, float* v) const {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < kVector<T>; ++k) v[k] = cuda::load_f32(e[k]);
  }
};

// kVector<T> bytes (8 or 4) as one load.
template <class T>
struct LoadBytes {
  __device__ __forceinline__ void operator()(const uint8_t* p, uint8_t* b) const {
    if constexpr (kVector<T> == 8) {
      const uint2 raw = *reinterpret_cast<const uint2*>(p);
      memcpy(b, &raw, 8);
    } else {
      const uint32_t raw = *reinterpret_cast<const uint32_t*>(p);
      memcpy(b, &raw, 4);
    }
  }
};

template <class T, class I>
__global__ void max_pool_forward_nhwc_kernel(MaxPoolGeometry g, const T* x, T* y, uint8_t* argmax, bool relu) {
  constexpr int V = kVector<T>;
  const I vectors = static_cast<I>(g.planes * g.oh * g.ow / V);
  for (I v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
    const I o = v * V;
    float out[V];
    uint8_t at[V];
    max_pool_window_nhwc<V, T, I>(g, x, o, relu, LoadVector<T>{}, out, at);
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < V; ++k) e[k] = cuda::store_as<T>(out[k]);
    *reinterpret_cast<uint4*>(y + o) = raw;
    if (argmax == nullptr) continue;
    if constexpr (V == 8) {
      uint2 bytes;
      memcpy(&bytes, at, 8);
      *reinterpret_cast<uint2*>(argmax + o) = bytes;
    } else {
      uint32_t bytes;
      memcpy(&bytes, at, 4);
      *reinterpret_cast<uint32_t*>(argmax + o) = bytes;
    }
  }
}

template <class T, class I>
__global__ void max_pool_backward_nhwc_kernel(MaxPoolGeometry g, const T* y, const T* dy, const uint8_t* argmax, T* dx,
                                              bool relu) {
  constexpr int V = kVector<T>;
  const I vectors = static_cast<I>(g.planes * g.h * g.w / V);
  for (I v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
    const I i = v * V;
    float sum[V];
    max_pool_input_grad_nhwc<V, T, I>(g, y, dy, argmax, i, relu, LoadVector<T>{}, LoadBytes<T>{}, sum);
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < V; ++k) e[k] = cuda::store_as<T>(sum[k]);
    *reinterpret_cast<uint4*>(dx + i) = raw;
  }
}

bool aligned_to(const void* p, std::size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace

struct Pool2dCuda::Impl {
  cuda::TensorDescriptor x, y;
  cuda::PoolingDescriptor pool;  // average kinds only
  MaxPoolGeometry geometry{};
};

Pool2dCuda::Pool2dCuda(Context& ctx, std::string name, const Pool2dOptions& options)
    : Pool2d(ctx, std::move(name), options), impl_(std::make_unique<Impl>()) {}

Pool2dCuda::~Pool2dCuda() = default;

TensorDesc Pool2dCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "Pool2d " + name_);
  const Shape& in = src.shape;
  if (in.size() != 4) throw std::invalid_argument("Pool2d " + name_ + ": expected NCHW input");
  training_ = training;
  if (options_.kind == PoolKind::kGlobalAvg) {
    kernel_ = 0;  // the whole map
    stride_ = 1;
    padding_ = 0;
  } else {
    kernel_ = options_.kernel;
    stride_ = options_.stride;
    padding_ = options_.padding;
  }
  const int64_t oh = options_.kind == PoolKind::kGlobalAvg ? 1 : (in[2] + 2 * padding_ - kernel_) / stride_ + 1;
  const int64_t ow = options_.kind == PoolKind::kGlobalAvg ? 1 : (in[3] + 2 * padding_ - kernel_) / stride_ + 1;
  if (oh < 1 || ow < 1) throw std::invalid_argument("Pool2d " + name_ + ": input too small");
  const Shape out = {in[0], in[1], oh, ow};
  const Device& device = src.device;
  native_nhwc_ = ctx_.channels_last && src.layout == Layout::kChannelsLast && options_.kind != PoolKind::kAvg;
  // In the native layout "plain" names the layout the layer computes in: NHWC (a global
  // average's [N, C, 1, 1] is the same bytes plain).
  plain_src_ = native_nhwc_ ? src : TensorDesc::plain(in, device, src.dtype);
  plain_dst_ = TensorDesc::plain(out, device, src.dtype);
  if (native_nhwc_ && options_.kind == PoolKind::kMax) plain_dst_.layout = Layout::kChannelsLast;
  TensorDesc dst = plain_dst_;
  if (options_.channels_last) dst.layout = Layout::kChannelsLast;
  src_to_plain_.configure(src, plain_src_);
  dst_out_.configure(plain_dst_, dst);
  saved_ = {};
  dst_plain_.configure(device, plain_dst_.nbytes(), training && ctx_.planned_backward && !dst_out_.needed());
  out_ = {dst, nullptr};
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};

  Impl& d = *impl_;
  d.geometry = {in[0] * in[1], in[2], in[3], oh, ow, kernel_, stride_, padding_, native_nhwc_ ? in[1] : 0};
  if (options_.kind == PoolKind::kMax) {
    if (kernel_ > kMaxPoolKernelLimit)
      throw std::invalid_argument("Pool2d " + name_ + ": max pooling windows of up to " +
                                  std::to_string(kMaxPoolKernelLimit) + " x " + std::to_string(kMaxPoolKernelLimit) +
                                  " on the GPU, got " + std::to_string(kernel_));
    if (training) argmax_.reserve(device, static_cast<std::size_t>(plain_dst_.numel()) * sizeof(uint8_t));
  } else if (!native_nhwc_) {  // (a native global average is our kernel: nothing to set up)
    d.x.set_nchw(in, src.dtype);
    d.y.set_nchw(out, src.dtype);
    if (options_.kind == PoolKind::kGlobalAvg)
      d.pool.set(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, cuda::to_int(in[2], "H"), cuda::to_int(in[3], "W"), 0,
                 1);
    else
      d.pool.set(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, options_.kernel, options_.kernel, options_.padding,
                 options_.stride);
    int n = 0, c = 0, h = 0, w = 0;
    cuda::check_cudnn(cudnnGetPooling2dForwardOutputDim(d.pool.get(), d.x.get(), &n, &c, &h, &w),
                      "cudnnGetPooling2dForwardOutputDim");
    if (h != oh || w != ow)
      throw std::logic_error("Pool2d " + name_ + ": cuDNN's output size differs from PyTorch's floor mode");
    cuda::cudnn_handle(ctx_);  // created here, not in the step loop
  }
  if (training && needs_input_grad_) {
    const bool planned = ctx_.planned_backward;
    diff_dst_to_plain_.configure(dst, plain_dst_, planned);
    diff_src_plain_.configure(device, plain_src_.nbytes(), planned);
    diff_src_out_.configure(plain_src_, src, planned);
  }
  return dst;
}

const TensorRef& Pool2dCuda::forward(const TensorRef& src) {
  Impl& d = *impl_;
  x_plain_ = src_to_plain_.convert(ctx_, src).data;
  void* y = dst_plain_.get();
  if (native_nhwc_ && options_.kind == PoolKind::kGlobalAvg) {
    const Shape& in = plain_src_.shape;
    cuda::global_avg_pool_nhwc(plain_src_.dtype, x_plain_, y, in[0], in[2] * in[3], in[1], cuda::stream_of(ctx_));
  } else if (options_.kind == PoolKind::kMax) {
    const int64_t total = plain_dst_.numel();
    cudaStream_t stream = cuda::stream_of(ctx_);
    uint8_t* argmax = training_ ? argmax_.as<uint8_t>() : nullptr;
    cuda::with_storage_type(plain_dst_.dtype, [&](auto tag) {
      using T = cuda::storage_t<decltype(tag)>;
      const bool int32 = plain_src_.numel() < kInt32Elements;
      if (vectorized<T>({x_plain_, y}, argmax)) {
        auto* kernel = int32 ? max_pool_forward_nhwc_kernel<T, int32_t> : max_pool_forward_nhwc_kernel<T, int64_t>;
        kernel<<<cuda::grid_for(total / kVector<T>), cuda::kThreads, 0, stream>>>(
            d.geometry, static_cast<const T*>(x_plain_), static_cast<T*>(y), argmax, options_.fuse_relu);
        return;
      }
      auto* kernel = int32 ? max_pool_forward_kernel<T, int32_t> : max_pool_forward_kernel<T, int64_t>;
      kernel<<<cuda::grid_for(total), cuda::kThreads, 0, stream>>>(d.geometry, static_cast<const T*>(x_plain_),
                                                                   static_cast<T*>(y), argmax, options_.fuse_relu);
    });
    cuda::check_launch("max_pool_forward_kernel");
  } else {
    const float one = 1.0f, zero = 0.0f;
    cuda::check_cudnn(cudnnPoolingForward(cuda::cudnn_handle(ctx_), d.pool.get(), &one, d.x.get(), x_plain_, &zero,
                                          d.y.get(), y),
                      "cudnnPoolingForward");
  }
  out_.data = dst_out_.convert(ctx_, {plain_dst_, y}).data;
  return out_;
}

const TensorRef& Pool2dCuda::backward(const TensorRef& diff_dst) {
  if (!training_) throw std::logic_error("Pool2d " + name_ + ": backward after inference forward");
  if (!needs_input_grad_) return none_;
  Impl& d = *impl_;
  const void* g = diff_dst_to_plain_.convert(ctx_, diff_dst).data;
  void* dx = diff_src_plain_.get();
  if (native_nhwc_ && options_.kind == PoolKind::kGlobalAvg) {
    const Shape& in = plain_src_.shape;
    cuda::global_avg_pool_nhwc_backward(plain_src_.dtype, g, dx, in[0], in[2] * in[3], in[1],
                                        cuda::stream_of(ctx_));
  } else if (options_.kind == PoolKind::kMax) {
    // Every element of dx is written (0 where no window chose it): no clearing pass.
    const int64_t total = plain_src_.numel();
    cudaStream_t stream = cuda::stream_of(ctx_);
    cuda::with_storage_type(plain_src_.dtype, [&](auto tag) {
      using T = cuda::storage_t<decltype(tag)>;
      const bool int32 = plain_src_.numel() < kInt32Elements;
      const T* y = dst_plain_.as<const T>();
      if (vectorized<T>({y, g, dx}, argmax_.get())) {
        auto* kernel = int32 ? max_pool_backward_nhwc_kernel<T, int32_t> : max_pool_backward_nhwc_kernel<T, int64_t>;
        kernel<<<cuda::grid_for(total / kVector<T>), cuda::kThreads, 0, stream>>>(
            d.geometry, y, static_cast<const T*>(g), argmax_.as<const uint8_t>(), static_cast<T*>(dx),
            options_.fuse_relu);
        return;
      }
      auto* kernel = int32 ? max_pool_backward_kernel<T, int32_t> : max_pool_backward_kernel<T, int64_t>;
      kernel<<<cuda::grid_for(total), cuda::kThreads, 0, stream>>>(d.geometry, y, static_cast<const T*>(g),
                                                                   argmax_.as<const uint8_t>(), static_cast<T*>(dx),
                                                                   options_.fuse_relu);
    });
    cuda::check_launch("max_pool_backward_kernel");
  } else {
    const float one = 1.0f, zero = 0.0f;
    cuda::check_cudnn(cudnnPoolingBackward(cuda::cudnn_handle(ctx_), d.pool.get(), &one, d.y.get(),
                                           dst_plain_.get(), d.y.get(), g, d.x.get(), x_plain_, &zero, d.x.get(),
                                           dx),
                      "cudnnPoolingBackward");
  }
  diff_src_.data = diff_src_out_.convert(ctx_, {plain_src_, dx}).data;
  return diff_src_;
}

// The NHWC kernels for V = 16 / sizeof(T) channels a thread: native NHWC max pooling with C a
// multiple of V, every tensor 16-byte aligned and the argmax's V bytes aligned (arena and
// allocator addresses are; a view into the middle of a buffer may not be).
template <class T>
bool Pool2dCuda::vectorized(std::initializer_list<const void*> tensors, const void* argmax) const {
  constexpr int V = kVector<T>;
  if (impl_->geometry.nhwc_channels == 0 || impl_->geometry.nhwc_channels % V != 0) return false;
  for (const void* p : tensors)
    if (!aligned_to(p, 16)) return false;
  return argmax == nullptr || aligned_to(argmax, V);
}

GradientPlan::Buffer* Pool2dCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  saved_ = {src, dst_out_.needed() ? nullptr : dst_plain_.write(plan)};
  plan.next();
  return saved_.out;
}

GradientPlan::Buffer* Pool2dCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  saved_.read(plan);
  GradientPlan::Buffer* diff_src = nullptr;
  if (needs_input_grad_) {
    diff_dst_to_plain_.plan(plan, diff_dst);
    diff_src = diff_src_out_.plan(plan, diff_src_plain_.write(plan));
  }
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
