// What compute devices this process can see. Kept free of CUDA headers so every module
// can ask; the answer is 0 GPUs when the CUDA backend is not built or no driver is present.
#pragma once

#include <string>
#include <vector>

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
// The CPU numbers of that mask, ascending.
std::vector<int> cpu_affinity_list();
// CPUs the cgroup's quota grants (cgroup v2 cpu.max, rounded up; a container's --cpus);
// 0 when unlimited or unknown.
int cgroup_cpu_quota();
// CPUs this process can keep busy: its affinity mask, capped by the cgroup quota.
int usable_cpu_count();
// Identifies the physical machine (the running kernel's boot id, which every process,
// container and network namespace on one machine shares); the host name when /proc does
// not say.
std::string machine_id();
std::string host_name();

}  // namespace sdp
