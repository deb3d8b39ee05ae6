// Raw memory on a Device: the one place that knows how to allocate, clear and copy bytes on
// each device. Tensor, the parameter arenas and the layers' buffers all allocate through it,
// so a CUDA build puts them in device memory and a CPU build never sees a CUDA call.
// A device this build cannot address (cuda without SDP_HAVE_CUDA) is a clear sdp::Error.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "core/dtype.hpp"

namespace sdp {

// Zero-filled allocation of `bytes` on `device` (64-byte aligned on the host), freed when the
// last copy of the returned pointer goes.
std::shared_ptr<void> allocate(const Device& device, std::size_t bytes);
// 64-byte aligned, zero-filled host allocation (allocate(Device::cpu(), bytes)).
std::shared_ptr<void> allocate_host(std::size_t bytes);
// Zero-filled host memory a GPU can copy from while the host goes on: page-locked
// (cudaHostAlloc) in a build with the CUDA backend and a driver that grants it, ordinary
// aligned host memory otherwise. For the batches a GPU model reads (data/batch.hpp).
std::shared_ptr<void> allocate_pinned_host(std::size_t bytes);

// What allocate() holds on one kind of device (the CPU, or the GPUs of this process): bytes
// now, and the most at once since the start or the last reset_peak_memory. Not what a library
// allocates for itself (cuDNN's and NCCL's own, oneDNN's scratch, the CUDA context): the
// runner's tensors, arenas and layer buffers.
struct MemoryUse {
  std::size_t current = 0;
  std::size_t peak = 0;
};
MemoryUse memory_use(DeviceKind kind);
void reset_peak_memory(DeviceKind kind);

// What an allocation is for, so a report can say where a device's peak went. An allocation
// made under no MemoryPurposeScope counts as kLayers (the layers' own buffers, and the rest).
enum class MemoryPurpose : int {
  kLayers = 0,
  kArena,       // a model's GradientPlan: the step's activations and backward's buffers
  kParameters,  // the parameter store: values, gradients, buffers (BatchNorm's running statistics)
  kOptimizer,   // the optimizer's state (momentum, moments)
  kWorkspace,   // cuDNN's workspace
  kInput,       // the model's staged input batches
  kBatchNormReserve,  // cuDNN's reserve space of the fused BatchNorms, kept from forward to backward
  kCount
};
const char* memory_purpose_name(MemoryPurpose purpose);
// Tags what this thread allocates while it lives; the innermost scope wins.
class MemoryPurposeScope {
 public:
  explicit MemoryPurposeScope(MemoryPurpose purpose);
  ~MemoryPurposeScope();
  MemoryPurposeScope(const MemoryPurposeScope&) = delete;
  MemoryPurposeScope& operator=(const MemoryPurposeScope&) = delete;

 private:
  MemoryPurpose previous_;
};
// Each purpose's bytes at the moment memory_use(kind).peak was reached.
std::array<std::size_t, static_cast<int>(MemoryPurpose::kCount)> memory_at_peak(DeviceKind kind);
// "arena 11,098.6 MB, parameters 293.3 MB, ...": memory_at_peak's nonzero purposes, largest first.
std::string describe_memory_at_peak(DeviceKind kind);
// `bytes` as "12.3 MB" (MiB, one decimal): the unit the memory reports use.
std::string format_megabytes(std::size_t bytes);
// The error a GPU's failed allocation ends the job with: what was asked, what sdp-train holds,
// what the device has left, and what a user can change.
std::string out_of_memory_message(const Device& device, std::size_t asked, const MemoryUse& held,
                                  std::size_t device_free, std::size_t device_total);

// zero_bytes and copy_bytes are synchronous: on a GPU they wait for every stream of the device
// before and after (see device_memory_cuda.cpp), so they are for setup, checkpoints and tests.
void zero_bytes(const Device& device, void* data, std::size_t bytes);
// Copies between any two devices this build can address (host <-> GPU included).
void copy_bytes(const Device& dst_device, void* dst, const Device& src_device, const void* src,
                std::size_t bytes);

// True when this build has a backend for `device` (the CPU always; CUDA with SDP_HAVE_CUDA).
bool device_supported(const Device& device);
// Throws sdp::Error (exit 2) naming `what` when `device` is not addressable by this build.
void require_device(const Device& device, const char* what);

}  // namespace sdp
