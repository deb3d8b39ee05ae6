// Context: what every layer of one model shares — the device it computes on, that device's
// stream, the parameter store it registers into, and the grad-ready hook backward reports
// to. Layers pick nothing from globals: the factories (X::create) read ctx.device, so two
// models on two devices can live in one process (Caffe's factory without Caffe::mode()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/parameter_store.hpp"
#include "core/tensor_desc.hpp"

namespace sdp::nn {

using GradReadyHook = std::function<void(const Param&)>;

// A device's ordered queue of work (oneDNN stream on the CPU; a cudaStream_t next). Only the
// backend that made it looks inside.
class Stream {
 public:
  virtual ~Stream() = default;
  // Blocks until all work queued so far is done (a no-op on the CPU, which runs in order on
  // the calling thread).
  virtual void synchronize() = 0;
  // The backend's own handle (a cudaStream_t under CUDA) for code outside nn/ that enqueues
  // on this stream (the optimizer's kernels); null on the CPU.
  virtual void* native_handle() { return nullptr; }
  // Copies `bytes` of host memory into this device's memory at `dst`, ordered after the work
  // queued so far. Returns once `src` may be reused (CUDA stages pageable memory first).
  virtual void copy_from_host(void* dst, const void* src, std::size_t bytes) = 0;
  // Starts copying `bytes` of host memory into this device's memory at `dst` on a side copy
  // stream and returns at once when `src` is page-locked (pageable memory is staged first),
  // so the copy runs while this stream computes. The work queued here after the next
  // wait_for_prefetch() sees the bytes; until then neither `src` nor `dst` may be touched.
  // The default (the CPU's) copies right away.
  virtual void prefetch_from_host(void* dst, const void* src, std::size_t bytes) { copy_from_host(dst, src, bytes); }
  virtual void wait_for_prefetch() {}
  // dst[i] = dtype(src[i]) for `count` elements in this device's memory (a model's f32 input
  // into its compute dtype under mixed precision). Only the CUDA stream has 16-bit compute.
  virtual void cast_from_f32(void* dst, DType dtype, const float* src, int64_t count);
};

// Creates the stream for `device`; throws sdp::Error when this build has no backend for it.
std::shared_ptr<Stream> make_stream(const Device& device);

struct Context {
  Context(ParameterStore& store_ref, Device device_value = Device::cpu(), uint64_t seed_value = 42)
      : store(store_ref),
        device(device_value),
        stream(make_stream(device_value)),
        seed(seed_value) {}

  ParameterStore& store;
  Device device;
  std::shared_ptr<Stream> stream;
  GradReadyHook grad_ready_hook;  // may be empty
  uint64_t seed;                  // base seed for stochastic layers (dropout)
  // Where stochastic layers are in their random stream: each draws from a generator seeded
  // by (seed, layer, random_stream, random_step), so a resumed run continues the same masks
  // with no generator state in the checkpoint. The trainer sets stream = rank, step = step.
  uint64_t random_stream = 0;
  int64_t random_step = 0;
};

// Copies `src` into `dst`: the same logical tensor (shape, dtype) in possibly different
// layouts, on the context's device. What tests and the loss use to read blocked layouts.
void convert_layout(Context& ctx, const TensorRef& src, const TensorRef& dst);

}  // namespace sdp::nn
