// CUDA half of nn/context: the stream, checked calls, layout conversion and owned buffers
// (nn/context_cuda.hpp, nn/cuda_util_cuda.hpp). Built only with SDP_HAVE_CUDA.
#include <cuda_runtime.h>

#include <map>
#include <stdexcept>
#include <string>

#include "core/cuda_casts.hpp"
#include "core/cuda_check_cuda.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "nn/channels_last_cuda.hpp"
#include "nn/context_cuda.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/dtype_cuda.hpp"
#include "nn/layout_rule.hpp"
#include "core/grid_stride_cuda.hpp"
#include "core/stream_cuda.hpp"

namespace sdp::nn {

namespace cuda {

void check(cudaError_t status, const char* call) { check_cuda(status, call); }

void check_launch(const char* kernel) { sdp::check_launch(kernel, "kernel launch"); }

}  // namespace cuda

namespace {

// NCHW <-> NHWC, one thread per element of the destination (layout_rule.hpp's index map).
template <class T>
__global__ void nchw_nhwc_kernel(const T* src, T* dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc) {
  const int64_t total = n * c * hw;
  SDP_GRID_STRIDE(i, total)
    dst[i] = src[channels_last_source(i, c, hw, to_nhwc)];
}

}  // namespace

namespace cuda {

cudaStream_t stream_of(Context& ctx) { return as_cuda_stream(*ctx.stream).get(); }

std::shared_ptr<void>& stream_attachment(Context& ctx, const std::string& key) {
  return as_cuda_stream(*ctx.stream).attachment(key);
}
}  // namespace cuda

void require_cuda_layout(const TensorDesc& desc, const std::string& who) {
  if (desc.device.is_cpu() || desc.layout == Layout::kBackend)
    throw std::invalid_argument(who + ": the CUDA layers take f32, f16 or bf16 tensors in the plain or "
                                "channels_last layout on a CUDA device, got " + desc.str());
  if (desc.layout == Layout::kChannelsLast && desc.shape.size() != 4)
    throw std::invalid_argument(who + ": channels_last needs a 4-D tensor, got " + desc.str());
}

void convert_layout_cuda(Context& ctx, const TensorRef& src, const TensorRef& dst) {
  require_cuda_layout(src.desc, "convert_layout");
  require_cuda_layout(dst.desc, "convert_layout");
  if (src.desc.dtype != dst.desc.dtype)
    throw std::invalid_argument("convert_layout: " + src.desc.str() + " -> " + dst.desc.str() + " changes the dtype");
  cudaStream_t s = cuda::stream_of(ctx);
  const int64_t total = src.desc.numel();
  if (total == 0) return;
  if (src.desc.layout == dst.desc.layout) {
    if (src.data != dst.data)
      cuda::check(cudaMemcpyAsync(dst.data, src.data, src.desc.nbytes(), cudaMemcpyDeviceToDevice, s),
                  "cudaMemcpyAsync");
    return;
  }
  const Shape& d = src.desc.shape;  // 4-D: require_cuda_layout checked channels_last's rank
  cuda::with_storage_type(src.desc.dtype, [&](auto tag) {
    using T = cuda::storage_t<decltype(tag)>;
    nchw_nhwc_kernel<T><<<cuda::grid_for(total), cuda::kThreads, 0, s>>>(
        src.as<const T>(), dst.as<T>(), d[0], d[1], d[2] * d[3], dst.desc.layout == Layout::kChannelsLast);
  });
  cuda::check_launch("nchw_nhwc_kernel");
}

void* CudaBuffer::reserve(const Device& device, std::size_t bytes) {
  if (bytes > bytes_ || !data_) {
    // Work queued earlier (a previous step, before a reconfigure) may still use the old
    // buffer; it goes once the device is idle, and before the new one is made, so the two
    // are never resident together. Only configure() grows buffers.
    if (data_) cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    data_.reset();
    data_ = allocate(device, bytes);
    bytes_ = bytes;
  }
  return data_.get();
}

void CudaBuffer::release() {
  if (!data_) return;
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // queued work may still read it
  data_.reset();
  bytes_ = 0;
}

void PlannedCudaBuffer::configure(const Device& device, std::size_t bytes, bool planned) {
  device_ = device;
  bound_ = nullptr;
  buffer_.bytes = bytes;
  buffer_.bind = [this](void* p) { bound_ = p; };
  if (planned)
    own_.release();  // the arena replaces it
  else
    own_.reserve(device, bytes);
}

void* PlannedCudaBuffer::get() {
  if (bound_ != nullptr) return bound_;
  return own_.reserve(device_, buffer_.bytes);
}

void CudaLayoutAdapter::configure(const TensorDesc& from, const TensorDesc& to, bool planned) {
  if (from.shape != to.shape || from.dtype != to.dtype) throw std::invalid_argument("CudaLayoutAdapter: " + from.str() + " -> " + to.str());
  require_cuda_layout(from, "CudaLayoutAdapter");
  require_cuda_layout(to, "CudaLayoutAdapter");
  needed_ = from.layout != to.layout;
  out_ = {to, nullptr};
  if (needed_) buffer_.configure(to.device, to.nbytes(), planned);
}

const TensorRef& CudaLayoutAdapter::convert(Context& ctx, const TensorRef& src) {
  if (!needed_) return src;
  out_.data = buffer_.get();
  convert_layout_cuda(ctx, src, out_);
  return out_;
}

void stage_channels_last_cuda(Context& ctx, const TensorRef& src, const TensorRef& dst) {
  const Shape& d = src.desc.shape;
  cuda::stage_nhwc(dst.desc.dtype, dst.data, static_cast<const float*>(src.data), d[0], d[1], d[2] * d[3],
                   cuda::stream_of(ctx));
}

}  // namespace sdp::nn
