#include "core/device_info.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
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

std::string cuda_unavailable_reason() {
#ifdef SDP_HAVE_CUDA
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(status);
  }
  return count > 0 ? "" : "the CUDA runtime sees no GPU";
#else
  return "this sdp-train was built without the CUDA backend";
#endif
}

namespace {
// CUDA encodes 13.0 as 13000.
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
}  // namespace

std::string cuda_runtime_version() {
#ifdef SDP_HAVE_CUDA
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess && v > 0)
    return version_and_file(cuda_version_text(v),
                            reinterpret_cast<const void*>(&cudaRuntimeGetVersion));
  cudaGetLastError();
#endif
  return "";
}

std::string cuda_driver_version() {
#ifdef SDP_HAVE_CUDA
  int v = 0;
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0) return cuda_version_text(v);
  cudaGetLastError();
#endif
  return "";
}

std::string version_and_file(const std::string& version, const void* symbol) {
  if (version.empty()) return "";
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return version;
  return version + " (" + info.dli_fname + ")";
}

std::vector<GpuDescription> describe_gpus() {
  std::vector<GpuDescription> gpus;
#ifdef SDP_HAVE_CUDA
  const int count = cuda_device_count();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    GpuDescription g;
    g.index = i;
    g.name = prop.name;
    g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    g.compute_capability = prop.major * 10 + prop.minor;
    char bus_id[32] = {0};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) == cudaSuccess) g.pci_bus_id = bus_id;
    for (int peer = 0; peer < count; ++peer) {
      int reachable = 0, rank = 0;
      if (peer == i || cudaDeviceCanAccessPeer(&reachable, i, peer) != cudaSuccess || !reachable) continue;
      if (cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, peer) != cudaSuccess) rank = -1;
      g.peers.push_back(peer);
      g.peer_performance_rank.push_back(rank);
    }
    cudaGetLastError();
    gpus.push_back(std::move(g));
  }
#endif
  return gpus;
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

std::vector<int> cpu_affinity_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    for (int c = 0; c < cpu_core_count(); ++c) cpus.push_back(c);
    return cpus;
  }
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

namespace {

// One level's quota in CPUs from its quota and period (microseconds); 0 for none ("max", -1).
double quota_cpus(const std::string& quota, long long period) {
  if (quota == "max" || period <= 0) return 0;
  char* end = nullptr;
  const long long q = std::strtoll(quota.c_str(), &end, 10);
  if (end == quota.c_str() || q <= 0) return 0;
  return static_cast<double>(q) / static_cast<double>(period);
}

// The quota of one cgroup directory: v2's cpu.max, else v1's pair of files; 0 for none.
double directory_quota(const std::string& dir) {
  std::string quota;
  long long period = 0;
  if (std::ifstream v2(dir + "/cpu.max"); v2 >> quota >> period) return quota_cpus(quota, period);
  std::ifstream v1_quota(dir + "/cpu.cfs_quota_us"), v1_period(dir + "/cpu.cfs_period_us");
  if (v1_quota >> quota && v1_period >> period) return quota_cpus(quota, period);
  return 0;
}

// The binding one of two limits (0: none).
double tighter(double a, double b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

// The smallest positive limit from `path` up to `mount` (the hierarchy's root), `level` giving
// one directory's (0: none).
template <typename Level>
double smallest_along(const std::string& mount, std::string path, Level level) {
  double smallest = 0;
  while (true) {
    smallest = tighter(smallest, level(mount + path));
    if (path.empty() || path == "/") break;
    const std::size_t slash = path.find_last_of('/');
    path = slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
  }
  return smallest;
}

// The smallest limit `level` gives along the process's cgroups: v2's unified path under
// `root`, and v1's path of `controller` under each of `mounts` (root + mount).
template <typename Level>
double smallest_cgroup_limit(const std::string& proc_self_cgroup, const std::string& root, const char* controller,
                             std::initializer_list<const char*> mounts, Level level) {
  // Lines "ID:CONTROLLERS:PATH": v2's is "0::PATH"; a v1 controller's lists its name.
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  double smallest = 0;
  while (std::getline(lines, line)) {
    const std::size_t first = line.find(':'), second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (controllers.empty()) {
      smallest = tighter(smallest, smallest_along(root, path, level));
      continue;
    }
    std::istringstream names(controllers);
    std::string name;
    bool listed = false;
    while (std::getline(names, name, ',')) listed = listed || name == controller;
    if (!listed) continue;
    for (const char* mount : mounts) smallest = tighter(smallest, smallest_along(root + mount, path, level));
  }
  return smallest;
}

// One cgroup directory's memory limit in bytes: v2's memory.max, else v1's
// memory.limit_in_bytes (unlimited reads as about 2^63); 0 for none.
double directory_memory_limit(const std::string& dir) {
  std::string text;
  if (std::ifstream v2(dir + "/memory.max"); v2 >> text) {
    char* end = nullptr;
    const double bytes = std::strtod(text.c_str(), &end);
    return end != text.c_str() && bytes > 0 ? bytes : 0;  // "max": none
  }
  double bytes = 0;
  if (std::ifstream v1(dir + "/memory.limit_in_bytes"); v1 >> bytes && bytes > 0 && bytes < 0x1p62) return bytes;
  return 0;
}

}  // namespace

double cgroup_cpu_quota_in(const std::string& proc_self_cgroup, const std::string& root) {
  return smallest_cgroup_limit(proc_self_cgroup, root, "cpu", {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"},
                               directory_quota);
}

double cgroup_memory_limit_in(const std::string& proc_self_cgroup, const std::string& root) {
  return smallest_cgroup_limit(proc_self_cgroup, root, "memory", {"/memory"}, directory_memory_limit);
}

int cgroup_cpu_quota() {
  std::ifstream in("/proc/self/cgroup");
  std::ostringstream text;
  text << in.rdbuf();
  const double cpus = cgroup_cpu_quota_in(text.str(), "/sys/fs/cgroup");
  return cpus > 0 ? static_cast<int>(std::ceil(cpus - 1e-9)) : 0;
}

int64_t usable_memory_bytes() {
  // The e2e tests' stand-in for a smaller machine (train/fault_plan.hpp's SDP_TEST_* kin).
  if (const char* test = std::getenv("SDP_TEST_NODE_MEMORY_BYTES")) return std::atoll(test);
  double bytes = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kb = 0;
    meminfo >> kb;
    if (key == "MemTotal:") {
      bytes = kb * 1024;
      break;
    }
    meminfo.ignore(256, '\n');
  }
  std::ifstream in("/proc/self/cgroup");
  std::ostringstream text;
  text << in.rdbuf();
  bytes = tighter(bytes, cgroup_memory_limit_in(text.str(), "/sys/fs/cgroup"));
  return static_cast<int64_t>(bytes);
}

int usable_cpu_count() {
  const int affinity = cpu_affinity_count();
  const int quota = cgroup_cpu_quota();
  return quota > 0 ? std::min(affinity, quota) : affinity;
}

std::string machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in >> id && !id.empty()) return id;
  return host_name();
}

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace sdp
