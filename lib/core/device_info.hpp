// What compute devices this process can see. Kept free of CUDA headers so every module
// can ask; the answer is 0 GPUs when the CUDA backend is not built or no driver is present.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

bool cuda_backend_built();
// Number of CUDA devices visible to this process (0 without a driver or a GPU).
int cuda_device_count();
// Why no GPU is usable, in the CUDA runtime's words ("no CUDA-capable device is detected",
// "CUDA driver version is insufficient ...", or that the backend is not built); "" when at
// least one is.
std::string cuda_unavailable_reason();

// For `sdp-train --version`, which says which of several installed copies of a library (a
// wheel's, the toolkit's, a module's) a process runs: "VERSION (FILE)", FILE being the shared
// object that holds `symbol` (left out when it is not in one); "" when `version` is.
std::string version_and_file(const std::string& version, const void* symbol);
// The CUDA runtime this process loaded, "13.0 (FILE)", and the driver's CUDA version, "13.0";
// "" without the backend (runtime) or without a driver (driver).
std::string cuda_runtime_version();
std::string cuda_driver_version();

// One GPU as `sdp-train env` reports it.
struct GpuDescription {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int64_t memory_bytes = 0;
  int compute_capability = 0;  // major * 10 + minor: 80 = A100, 90 = H100
  // The other GPUs of this machine this one reaches peer-to-peer (NVLink or PCIe), and the
  // driver's performance rank of each link (0 is the fastest; NVLink ranks above PCIe).
  std::vector<int> peers;
  std::vector<int> peer_performance_rank;
};
// Every GPU this process sees (empty without the CUDA backend, a driver or a GPU).
std::vector<GpuDescription> describe_gpus();

// Makes `ordinal` the current CUDA device of this process (no-op without CUDA).
void set_cuda_device(int ordinal);
// Online CPU cores of the machine (not the launcher's affinity mask).
int cpu_core_count();
// Cores this process may run on (the affinity mask mpirun's --bind-to sets).
int cpu_affinity_count();
// The CPU numbers of that mask, ascending.
std::vector<int> cpu_affinity_list();
// CPUs the cgroup's quota grants (a container's --cpus, a Kubernetes limit, a simulated
// host's share), rounded up; 0 when unlimited or unknown.
int cgroup_cpu_quota();
// cgroup_cpu_quota's reading, from /proc/self/cgroup's text and the cgroup file systems under
// `root` (/sys/fs/cgroup): the smallest quota along the process's cgroup path and its
// ancestors that exist there (a container sees its own cgroup as the root): cgroup v2's
// cpu.max ("max" or "QUOTA PERIOD"), or v1's cpu.cfs_quota_us / cpu.cfs_period_us in the cpu
// controller's hierarchy (mounted as cpu, cpu,cpuacct or cpuacct,cpu). In CPUs, unrounded; 0
// when no level sets one.
double cgroup_cpu_quota_in(const std::string& proc_self_cgroup, const std::string& root);
// The same walk for the memory limit in bytes: v2's memory.max or v1's memory.limit_in_bytes
// (under root/memory); 0 when no level sets one.
double cgroup_memory_limit_in(const std::string& proc_self_cgroup, const std::string& root);
// Bytes of memory this process's machine has (MemTotal), capped by its cgroup's limit; 0 when
// unknown.
int64_t usable_memory_bytes();
// CPUs this process can keep busy: its affinity mask, capped by the cgroup quota.
int usable_cpu_count();
// Identifies the physical machine (the running kernel's boot id, which every process,
// container and network namespace on one machine shares); the host name when /proc does
// not say.
std::string machine_id();
std::string host_name();

}  // namespace sdp
