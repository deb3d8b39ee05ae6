#include "distributed/device_assignment.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/device_info.hpp"
#include "core/error.hpp"

namespace sdp {

DeviceAssignment assign_device(DevicePreference preference, int threads, const World& world) {
  DeviceAssignment a;
  a.gpus_on_node = cuda_device_count();
  const bool want_cuda = preference == DevicePreference::kCuda ||
                         (preference == DevicePreference::kAuto && a.gpus_on_node > 0);
  if (want_cuda) {
    if (!cuda_backend_built())
      throw InputError("device: cuda, but this sdp-train was built without the CUDA backend "
                       "(configure with -DSDP_WITH_CUDA=ON on a machine with the CUDA toolkit)");
    if (a.gpus_on_node < world.local_size())
      throw InputError("device: " + to_string(preference) + " needs one GPU per rank, but node '" +
                       world.node_name() + "' runs " + std::to_string(world.local_size()) +
                       " ranks and has " + std::to_string(a.gpus_on_node) +
                       " GPU(s); start at most that many ranks per node or use device: cpu");
    a.device = Device::cuda(world.local_rank());
    set_cuda_device(world.local_rank());
  }
  if (threads > 0) {
    a.threads = threads;
    a.threads_source = "threads";
  } else if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && std::atoi(omp) > 0) {
    a.threads = std::atoi(omp);
    a.threads_source = "OMP_NUM_THREADS";
  } else {
    a.threads = std::max(1, cpu_core_count() / world.local_size());
    a.threads_source = "cores / ranks per node";
  }
  return a;
}

}  // namespace sdp
