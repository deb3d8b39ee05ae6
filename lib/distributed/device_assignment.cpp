#include "distributed/device_assignment.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "distributed/collectives.hpp"

namespace sdp {

namespace {

// "0-3,8,10-11": short enough for allgather_strings even on a 192-CPU machine.
std::string cpu_ranges(const std::vector<int>& cpus) {
  std::ostringstream out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (i > 0) out << ',';
    out << cpus[i];
    if (j > i) out << '-' << cpus[j];
    i = j + 1;
  }
  return out.str();
}

std::set<int> parse_cpu_ranges(const std::string& text) {
  std::set<int> cpus;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    const size_t dash = part.find('-');
    const int first = std::atoi(part.substr(0, dash).c_str());
    const int last = dash == std::string::npos ? first : std::atoi(part.substr(dash + 1).c_str());
    for (int c = first; c <= last; ++c) cpus.insert(c);
  }
  return cpus;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}

}  // namespace

MachineShare share_machine(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const auto machines = allgather_strings(comm, machine_id());
  const std::string my_cpus = cpu_ranges(cpu_affinity_list());
  const auto cpu_sets = allgather_strings(comm, my_cpus);
  MachineShare share;
  share.usable_cpus = usable_cpu_count();
  share.host = host_name();
  share.machine_ranks = share.sharing_ranks = 0;
  std::set<int> machine_cpus;
  for (size_t r = 0; r < machines.size(); ++r) {
    if (machines[r] != machines[rank]) continue;
    share.machine_world_ranks.push_back(static_cast<int>(r));
    ++share.machine_ranks;
    share.sharing_ranks += cpu_sets[r] == my_cpus;
    const std::set<int> cpus = parse_cpu_ranges(cpu_sets[r]);
    machine_cpus.insert(cpus.begin(), cpus.end());
  }
  share.machine_cpus = std::max<int>(1, static_cast<int>(machine_cpus.size()));
  return share;
}

int default_cpu_threads(const MachineShare& share) {
  return std::max(1, share.usable_cpus / std::max(1, share.sharing_ranks));
}

ThreadChoice choose_threads(int configured, const char* omp_num_threads,
                            const char* slurm_cpus_per_task, const MachineShare& share) {
  if (configured > 0) return {configured, "threads"};
  if (omp_num_threads && std::atoi(omp_num_threads) > 0)
    return {std::atoi(omp_num_threads), "OMP_NUM_THREADS"};
  if (slurm_cpus_per_task && std::atoi(slurm_cpus_per_task) > 0)
    return {std::max(1, std::min(std::atoi(slurm_cpus_per_task), share.usable_cpus)),
            "SLURM_CPUS_PER_TASK"};
  return {default_cpu_threads(share), kThreadsFromShare};
}

GpuChoice choose_gpu(int local_rank, const std::vector<std::vector<std::string>>& visible_by_local_rank,
                     bool share_gpus) {
  std::set<std::string> taken;
  for (int r = 0; r < static_cast<int>(visible_by_local_rank.size()); ++r) {
    const auto& visible = visible_by_local_rank[r];
    int ordinal = -1;
    for (int i = 0; i < static_cast<int>(visible.size()) && ordinal < 0; ++i)
      if (!taken.count(visible[i])) ordinal = i;
    if (r != local_rank) {
      if (ordinal >= 0) taken.insert(visible[ordinal]);
      continue;
    }
    if (ordinal >= 0) return {ordinal, ""};
    if (share_gpus && !visible.empty()) return {local_rank % static_cast<int>(visible.size()), ""};
    std::string seen;
    for (const auto& id : visible) seen += (seen.empty() ? "" : ", ") + id;
    return {-1, visible.empty() ? "local rank " + std::to_string(r) + " sees no GPU"
                                : "the GPUs local rank " + std::to_string(r) + " sees (" + seen +
                                      ") are all taken by lower local ranks"};
  }
  return {-1, "local rank " + std::to_string(local_rank) + " is not on this node"};
}

DeviceAssignment assign_device(DevicePreference preference, int threads, const World& world,
                               const MachineShare& share, bool share_gpus) {
  DeviceAssignment a;
  // Every local rank says which GPUs it sees, before any rank decides (all must gather).
  std::string mine;
  for (const GpuDescription& g : describe_gpus()) mine += (mine.empty() ? "" : ",") + g.pci_bus_id;
  std::vector<std::vector<std::string>> visible;
  for (const std::string& list : allgather_strings(world.intra(), mine)) {
    visible.emplace_back();
    std::istringstream in(list);
    for (std::string id; std::getline(in, id, ',');) visible.back().push_back(id);
  }
  a.gpus_on_node = cuda_device_count();
  const bool want_cuda = preference == DevicePreference::kCuda ||
                         (preference == DevicePreference::kAuto && a.gpus_on_node > 0);
  if (want_cuda) {
    if (!cuda_backend_built())
      throw InputError(
          "device: cuda, but this sdp-train was built without the CUDA backend "
          "(configure with -DSDP_WITH_CUDA=ON on a machine with the CUDA toolkit)");
    const GpuChoice gpu = choose_gpu(world.local_rank(), visible, share_gpus);
    if (gpu.ordinal < 0)
      throw InputError(
          "device: " + to_string(preference) + " needs one GPU per rank, but node '" +
          world.node_name() + "' runs " + std::to_string(world.local_size()) +
          " ranks and this rank sees " + std::to_string(a.gpus_on_node) + " GPU(s)" +
          (a.gpus_on_node == 0 ? " (" + cuda_unavailable_reason() + ")"
                               : " (" + gpu.problem + ")") +
          "; start at most that many ranks per node (under Slurm: --gpus-per-task=1 or "
          "--ntasks-per-node = the node's GPUs), let ranks share GPUs (distributed.share_gpus: "
          "true, gradients over MPI through host memory) or use device: cpu");
    a.device = Device::cuda(gpu.ordinal);
    set_cuda_device(gpu.ordinal);
  }
  const ThreadChoice choice = choose_threads(threads, std::getenv("OMP_NUM_THREADS"),
                                             std::getenv("SLURM_CPUS_PER_TASK"), share);
  a.threads = choice.threads;
  a.threads_source = choice.source;
  a.cpus = default_cpu_threads(share);
  return a;
}

std::string warn_if_cpus_oversubscribed(MPI_Comm comm, const MachineShare& share, int threads) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const auto all_threads = allgather_ints(comm, threads);
  const auto all_usable = allgather_ints(comm, share.usable_cpus);
  if (share.machine_world_ranks.empty() || share.machine_world_ranks.front() != rank) return "";
  int total = 0, most = 0;
  bool rank_over = false;
  for (int r : share.machine_world_ranks) {
    total += all_threads[r];
    most = std::max(most, all_threads[r]);
    rank_over = rank_over || all_threads[r] > all_usable[r];
  }
  // Single-threaded ranks have no OpenMP threads to spin: more of them than CPUs is plain
  // oversubscription, which the user asked mpirun for.
  if (most <= 1 || (total <= share.machine_cpus && !rank_over)) return "";
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const bool passive = policy && std::string(policy) == "passive";
  std::string message = "machine '" + share.host + "' runs " + std::to_string(share.machine_ranks) +
                        " rank(s) with " + std::to_string(total) + " CPU threads in all on " +
                        std::to_string(share.machine_cpus) + " CPU(s)" +
                        (rank_over ? " (some rank has more threads than CPUs it may run on)" : "") +
                        "; ";
  message += passive ? "OpenMP threads wait without spinning (OMP_WAIT_POLICY=passive), "
                       "but the ranks still time-share the cores: drop `threads` (the default "
                       "divides each machine's CPUs among its ranks) for full speed"
                     : "with OMP_WAIT_POLICY=" + std::string(policy ? policy : "unset") +
                           " spinning threads slow every step ~10x: drop `threads` (the "
                           "default divides each machine's CPUs among its ranks) or set "
                           "OMP_WAIT_POLICY=passive";
  log_warn(message);
  return message;
}

bool threads_oversubscribe_before_mpi(int threads) {
  if (threads <= 1) return false;
  int ranks_here = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (ranks_here <= 0) ranks_here = env_int("MPI_LOCALNRANKS");
  // srun: "2(x3),1" = 2 tasks on each of 3 nodes, then 1; the first node's count will do.
  if (ranks_here <= 0) ranks_here = env_int("SLURM_STEP_TASKS_PER_NODE");
  if (ranks_here <= 0) ranks_here = 1;
  return threads > usable_cpu_count() || threads * ranks_here > cpu_core_count();
}

}  // namespace sdp
