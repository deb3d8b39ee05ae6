#include "core/device_info.hpp"

#include <sched.h>
#include <unistd.h>

#include <thread>

#ifdef SDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sdp {

bool cuda_backend_built() {
#ifdef SDP_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef SDP_HAVE_CUDA
  int count = 0;
  // No driver or no device is not an error for us: the CPU backend takes over.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later CUDA calls are not affected
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

void set_cuda_device(int ordinal) {
#ifdef SDP_HAVE_CUDA
  cudaSetDevice(ordinal);
#else
  (void)ordinal;
#endif
}

int cpu_core_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int cpu_affinity_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpu_core_count();
  return CPU_COUNT(&set);
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace sdp
