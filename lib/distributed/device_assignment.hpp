// Which device a rank computes on and with how many CPU threads (DESIGN.md §4):
// GPU = local_rank when the CUDA backend is built and the node has a GPU per rank, else CPU;
// CPU threads = cores / ranks per node unless `threads` or OMP_NUM_THREADS says otherwise.
#pragma once

#include <string>

#include "config/choices.hpp"
#include "core/dtype.hpp"
#include "distributed/world.hpp"

namespace sdp {

struct DeviceAssignment {
  Device device;
  int threads = 1;
  int gpus_on_node = 0;
  std::string threads_source;  // "threads", "OMP_NUM_THREADS" or "cores / ranks per node"
};

// `preference` is the job's device key. Throws InputError when cuda is required but
// unavailable or the node has fewer GPUs than ranks. Pins the GPU.
DeviceAssignment assign_device(DevicePreference preference, int threads, const World& world);

}  // namespace sdp
