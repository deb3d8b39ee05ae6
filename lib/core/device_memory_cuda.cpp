// CUDA half of core/device_memory (built only with SDP_HAVE_CUDA).
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/cuda_check_cuda.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/stream.hpp"

namespace sdp {

// These helpers are synchronous with respect to every stream of the device, not only the
// legacy default stream their calls go to: the layers compute on non-blocking streams
// (nn/context_cuda), which do not wait for the default stream and which it does not wait
// for. cudaMemset is asynchronous to the host and a pageable host-to-device cudaMemcpy may
// return before its DMA lands, so without the device-wide synchronizations a kernel queued
// next on a layer's stream could read the bytes before they are there (and a device-to-host
// copy could read a layer's output before its kernel ran). They are setup and test paths
// (initialization, checkpoints, test harnesses), never the step loop.
std::shared_ptr<void> cuda_allocate(int ordinal, std::size_t bytes) {
  const ConcurrentDeviceWork not_while_recording;  // a loader thread's, during a step's recording
  check_cuda(cudaSetDevice(ordinal), "cudaSetDevice");
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw RuntimeError(
        out_of_memory_message(Device::cuda(ordinal), bytes, memory_use(DeviceKind::kCuda), free_bytes, total_bytes));
  }
  check_cuda(status, "cudaMalloc");
  check_cuda(cudaMemset(p, 0, bytes), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return std::shared_ptr<void>(p, [](void* q) {
    const ConcurrentDeviceWork not_while_recording;  // cudaFree synchronises the device
    cudaFree(q);
  });
}

// Null when the driver refuses (no GPU, or the locked-memory limit): the caller falls back
// to pageable memory, which is slower to copy from but works.
std::shared_ptr<void> cuda_allocate_pinned_host(std::size_t bytes) {
  const ConcurrentDeviceWork not_while_recording;
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes == 0 ? 64 : bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it so the next check does not report it
    return nullptr;
  }
  std::memset(p, 0, bytes);
  return std::shared_ptr<void>(p, [](void* q) {
    const ConcurrentDeviceWork not_while_recording;
    cudaFreeHost(q);
  });
}

void cuda_zero(int ordinal, void* data, std::size_t bytes) {
  const ConcurrentDeviceWork not_while_recording;
  check_cuda(cudaSetDevice(ordinal), "cudaSetDevice");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check_cuda(cudaMemset(data, 0, bytes), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// cudaMemcpyDefault: unified addressing tells host from device pointers.
void cuda_copy(void* dst, const void* src, std::size_t bytes) {
  const ConcurrentDeviceWork not_while_recording;
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace sdp
