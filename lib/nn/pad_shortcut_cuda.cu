// CUDA kernels and layer of pad_shortcut_cuda.hpp.
#include <stdexcept>

#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/pad_shortcut_cuda.hpp"
#include "core/grid_stride_cuda.hpp"

namespace sdp::nn {

namespace {
// One thread per output element; padded channels get 0, so nothing needs clearing.
template <class T>
__global__ void pad_shortcut_forward_kernel(PadShortcutGeometry g, const T* x, T* y) {
  const int64_t total = g.n * g.oc * g.oh * g.ow;
  SDP_GRID_STRIDE(o, total) {
    const int64_t from = pad_shortcut_source(g, o);
    y[o] = from < 0 ? cuda::store_as<T>(0.0f) : x[from];
  }
}

// One thread per input element: every element of dx is written (0 where subsampling
// skipped it).
template <class T>
__global__ void pad_shortcut_backward_kernel(PadShortcutGeometry g, const T* dy, T* dx) {
  const int64_t total = g.n * g.c * g.h * g.w;
  SDP_GRID_STRIDE(i, total) {
    const int64_t from = pad_shortcut_grad_source(g, i);
    dx[i] = from < 0 ? cuda::store_as<T>(0.0f) : dy[from];
  }
}
}  // namespace

PadShortcutCuda::PadShortcutCuda(Context& ctx, std::string name, int in_channels, int out_channels, int stride)
    : PadShortcut(ctx, std::move(name), in_channels, out_channels, stride) {}

TensorDesc PadShortcutCuda::configure(const TensorDesc& src, bool training) {
  require_cuda_layout(src, "PadShortcut " + name_);
  const Shape& in = src.shape;
  if (in.size() != 4 || in[1] != in_channels_)
    throw std::invalid_argument("PadShortcut " + name_ + ": unexpected input shape");
  training_ = training;
  const int64_t s = stride_;
  const Shape out = {in[0], out_channels_, (in[2] + s - 1) / s, (in[3] + s - 1) / s};
  // Native channels_last (Context::channels_last, NHWC input): the kernels index NHWC.
  const bool nhwc = ctx_.channels_last && src.layout == Layout::kChannelsLast;
  geometry_ = {in[0], in[1], in[2], in[3], out[1], out[2], out[3], s, (out[1] - in[1]) / 2, nhwc};
  plain_src_ = nhwc ? src : TensorDesc::plain(in, src.device, src.dtype);
  src_to_plain_.configure(src, plain_src_);
  out_ = {TensorDesc::plain(out, src.device, src.dtype), nullptr};
  if (nhwc) out_.desc.layout = Layout::kChannelsLast;
  dst_.configure(src.device, out_.desc.nbytes(), training && ctx_.planned_backward);
  diff_src_ = {src, nullptr};
  none_ = {src, nullptr};
  if (training && needs_input_grad_) {
    diff_src_plain_.configure(src.device, plain_src_.nbytes(), ctx_.planned_backward);
    diff_to_src_.configure(plain_src_, src, ctx_.planned_backward);
  }
  return out_.desc;
}

const TensorRef& PadShortcutCuda::forward(const TensorRef& src) {
  const TensorRef& x = src_to_plain_.convert(ctx_, src);
  out_.data = dst_.get();
  const int64_t total = out_.desc.numel();
  cudaStream_t stream = cuda::stream_of(ctx_);
  cuda::with_storage_type(x.desc.dtype, [&](auto tag) {
    using T = cuda::storage_t<decltype(tag)>;
    pad_shortcut_forward_kernel<T><<<cuda::grid_for(total), cuda::kThreads, 0, stream>>>(geometry_, x.as<const T>(),
                                                                                         out_.as<T>());
  });
  cuda::check_launch("pad_shortcut_forward_kernel");
  return out_;
}

const TensorRef& PadShortcutCuda::backward(const TensorRef& diff_dst) {
  if (!needs_input_grad_) return none_;
  if (!training_) throw std::logic_error("PadShortcut " + name_ + ": backward without a training configure");
  void* dx = diff_src_plain_.get();
  const int64_t total = plain_src_.numel();
  cudaStream_t stream = cuda::stream_of(ctx_);
  cuda::with_storage_type(diff_dst.desc.dtype, [&](auto tag) {
    using T = cuda::storage_t<decltype(tag)>;
    pad_shortcut_backward_kernel<T><<<cuda::grid_for(total), cuda::kThreads, 0, stream>>>(
        geometry_, diff_dst.as<const T>(), static_cast<T*>(dx));
  });
  cuda::check_launch("pad_shortcut_backward_kernel");
  diff_src_.data = diff_to_src_.convert(ctx_, {plain_src_, dx}).data;
  return diff_src_;
}

// Its backward reads nothing of forward's.
GradientPlan::Buffer* PadShortcutCuda::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  plan.read(src);
  GradientPlan::Buffer* out = dst_.write(plan);
  plan.next();
  return out;
}

GradientPlan::Buffer* PadShortcutCuda::plan_backward(GradientPlan& plan, GradientPlan::Buffer* diff_dst) {
  plan.read(diff_dst);
  GradientPlan::Buffer* diff_src = needs_input_grad_ ? diff_to_src_.plan(plan, diff_src_plain_.write(plan)) : nullptr;
  plan.next();
  return diff_src;
}

}  // namespace sdp::nn
