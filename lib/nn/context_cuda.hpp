// The CUDA half of nn/context (built only with SDP_HAVE_CUDA), in the terms the rest of nn/
// may see: no CUDA type here, so context.cpp and the XCuda class headers include it in
// every build. CUDA-typed helpers for the kernels are in nn/cuda_util_cuda.hpp.
//
// Layouts on the GPU: the CUDA layers speak plain NCHW (and NC) and, where the CPU twin can
// produce or ask for it, channels_last NHWC; a layer that needs plain input converts NHWC
// with CudaLayoutAdapter. The CPU's blocked layouts (kBackend) never reach a GPU layer and
// are rejected with a clear error.
#pragma once

#include <cstddef>
#include <memory>

#include "core/tensor_desc.hpp"
#include "nn/context.hpp"
#include "nn/gradient_plan.hpp"

namespace sdp::nn {

// convert_layout for CUDA tensors: plain <-> channels_last by a kernel, equal layouts by a
// copy, all on ctx's stream.
void convert_layout_cuda(Context& ctx, const TensorRef& src, const TensorRef& dst);
// stage_channels_last on the GPU (one cast-and-reorder kernel).
void stage_channels_last_cuda(Context& ctx, const TensorRef& src, const TensorRef& dst);
// release_shared_scratch on the GPU: frees the stream's shared cuDNN workspace (cudnn_cuda.cpp).
void release_shared_scratch_cuda(Context& ctx);
// Throws std::invalid_argument naming `who` unless `desc` is on a CUDA device in the plain
// or channels_last layout (f32, or f16/bf16 under mixed precision: nn/dtype_cuda.hpp).
void require_cuda_layout(const TensorDesc& desc, const std::string& who);

// Device memory a CUDA layer owns: allocated at configure (grown, never shrunk), never in
// forward/backward.
class CudaBuffer {
 public:
  // Makes the buffer hold at least `bytes` on `device`; returns its address.
  void* reserve(const Device& device, std::size_t bytes);
  // Frees it once the device is idle (a reconfigured layer that no longer needs it).
  void release();
  void* get() const { return data_.get(); }
  std::size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_.get()); }

 private:
  std::shared_ptr<void> data_;
  std::size_t bytes_ = 0;
};

// A layer's output or a buffer backward writes (an input gradient, a fused ReLU's gradient, a
// gradient sum, a layout conversion): the GradientPlan places it in its shared arena when the model
// plans (Context::planned_backward), otherwise it is the layer's own, allocated at configure
// as a CudaBuffer. Read its address with get() at each use: the plan binds it after configure.
class PlannedCudaBuffer {
 public:
  // Sizes the buffer and forgets the last plan's binding. Unplanned, it takes its storage now.
  void configure(const Device& device, std::size_t bytes, bool planned);
  // Declares a write of this buffer in the current operation (nn/gradient_plan.hpp).
  GradientPlan::Buffer* write(GradientPlan& plan) { return plan.write(&buffer_); }
  // The plan's address; without one (a planned layer used on its own, as unit tests do) its
  // own storage, made once.
  void* get();
  template <typename T>
  T* as() { return static_cast<T*>(get()); }

 private:
  Device device_;
  void* bound_ = nullptr;
  CudaBuffer own_;
  GradientPlan::Buffer buffer_;
};

// The planned buffers a layer's backward reads from its forward (its input and output): kept
// by plan_forward, declared read again by plan_backward. Cleared at configure, so a
// plan_backward without plan_forward declares nothing. `output_read` false (a lean plan,
// Context::lean_plan, and a backward that does not read its output) lets the output
// die once its consumers in forward have read it.
struct SavedForward {
  GradientPlan::Buffer* src = nullptr;
  GradientPlan::Buffer* out = nullptr;
  void read(GradientPlan& plan, bool output_read = true) const {
    plan.read(src);
    if (output_read) plan.read(out);
  }
};

// Moves a tensor between a fixed pair of device-neutral layouts on the GPU (the CUDA
// LayoutAdapter): configure() keeps a buffer only when the layouts differ; convert() fills
// it on ctx's stream, or returns the input unchanged. A planned adapter (one backward uses)
// takes its buffer from the GradientPlan: declare it with plan(), which returns the buffer its
// output lives in (`input` when no conversion is needed).
class CudaLayoutAdapter {
 public:
  void configure(const TensorDesc& from, const TensorDesc& to, bool planned = false);
  bool needed() const { return needed_; }
  const TensorRef& convert(Context& ctx, const TensorRef& src);
  GradientPlan::Buffer* plan(GradientPlan& plan, GradientPlan::Buffer* input) {
    return needed_ ? buffer_.write(plan) : input;
  }

 private:
  bool needed_ = false;
  TensorRef out_;
  PlannedCudaBuffer buffer_;
};

}  // namespace sdp::nn
