// CUDA half of core/device_memory (built only with SDP_HAVE_CUDA).
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "core/error.hpp"

namespace sdp {

namespace {
void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw RuntimeError(std::string(call) + " failed: " + cudaGetErrorString(status));
}
}  // namespace

std::shared_ptr<void> cuda_allocate(int ordinal, std::size_t bytes) {
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 256 : bytes), "cudaMalloc");
  check(cudaMemset(p, 0, bytes), "cudaMemset");
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

void cuda_zero(int ordinal, void* data, std::size_t bytes) {
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  check(cudaMemset(data, 0, bytes), "cudaMemset");
}

// cudaMemcpyDefault: unified addressing tells host from device pointers.
void cuda_copy(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

}  // namespace sdp
