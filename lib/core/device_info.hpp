// What compute devices this process can see. Kept free of CUDA headers so every module
// can ask; the answer is 0 GPUs when the CUDA backend is not built or no driver is present.
#pragma once

#include <string>

namespace sdp {

bool cuda_backend_built();
// Number of CUDA devices visible to this process (0 without a driver or a GPU).
int cuda_device_count();
// Makes `ordinal` the current CUDA device of this process (no-op without CUDA).
void set_cuda_device(int ordinal);
// Online CPU cores of the machine (not the launcher's affinity mask).
int cpu_core_count();
// Cores this process may run on (the affinity mask mpirun's --bind-to sets).
int cpu_affinity_count();
std::string host_name();

}  // namespace sdp
