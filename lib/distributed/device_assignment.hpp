// Which device a rank computes on and with how many CPU threads (docs/guides/many-ranks.md):
// GPU = the local_rank-th GPU when the CUDA backend is built and the node has a GPU per rank
// (or, when a launcher gives each rank its own GPUs, as Slurm's --gpus-per-task does, the
// first of its own), else CPU; CPU threads = `threads`, else OMP_NUM_THREADS, else Slurm's
// --cpus-per-task, else the rank's CPUs / the ranks of its physical machine that share them.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "config/choices.hpp"
#include "core/dtype.hpp"
#include "distributed/world.hpp"

namespace sdp {

// How the ranks of one physical machine share its CPUs. The machine is found by the kernel's
// boot id, not by the logical node: distributed.ranks_per_node, SageMaker hosts or network
// namespaces can split one machine into several nodes whose ranks still share its cores.
struct MachineShare {
  int machine_ranks = 1;  // ranks on this rank's machine
  int sharing_ranks = 1;  // of those, the ranks whose CPU set is this rank's (itself included)
  int usable_cpus = 1;    // this rank's CPU set, capped by the cgroup quota
  int machine_cpus = 1;   // CPUs in the union of the machine's ranks' sets
  std::vector<int> machine_world_ranks;  // ascending; the first one speaks for the machine
  std::string host;                      // this rank's host name, for messages
};

// Collective over `comm`.
MachineShare share_machine(MPI_Comm comm);

// CPU threads when neither `threads` nor OMP_NUM_THREADS is set.
int default_cpu_threads(const MachineShare& share);

inline constexpr const char* kThreadsFromShare = "CPUs / ranks sharing them";

struct ThreadChoice {
  int threads = 1;
  std::string source;  // "threads", "OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK" or kThreadsFromShare
};
// `configured` is the job's `threads` key (0 = not set); the other two are the environment
// variables' values (nullptr = unset). Slurm's CPUs per task are capped at the CPUs the rank
// may run on: an allocation larger than the rank's CPU set would only oversubscribe it.
ThreadChoice choose_threads(int configured, const char* omp_num_threads,
                            const char* slurm_cpus_per_task, const MachineShare& share);

// The GPU a rank computes on, from the PCI bus ids of the GPUs each local rank of its node
// sees (in that rank's CUDA order). Local ranks take GPUs in local-rank order, each the
// first of its own list that no lower local rank took: ranks that see the same GPUs get
// ordinal local_rank, as before; ranks that a launcher gave GPUs of their own (Slurm's
// --gpus-per-task, a per-rank CUDA_VISIBLE_DEVICES) get their first. `ordinal` is -1 and
// `problem` says why when the rank is left without one, unless `share_gpus` (the job's
// distributed.share_gpus): then a rank left over takes GPU local_rank mod the GPUs it sees.
struct GpuChoice {
  int ordinal = -1;
  std::string problem;
};
GpuChoice choose_gpu(int local_rank, const std::vector<std::vector<std::string>>& visible_by_local_rank,
                     bool share_gpus = false);

struct DeviceAssignment {
  Device device;
  int threads = 1;
  int cpus = 1;  // this rank's share of its machine's CPUs (default_cpu_threads)
  int gpus_on_node = 0;
  std::string threads_source;  // see ThreadChoice
};

// `preference` is the job's device key. Throws InputError when cuda is required but
// unavailable or the node has fewer GPUs than ranks (unless `share_gpus`). Pins the GPU.
// Collective over the node's ranks (world.intra()): they compare the GPUs they see.
DeviceAssignment assign_device(DevicePreference preference, int threads, const World& world,
                               const MachineShare& share, bool share_gpus = false);

// When the ranks of a machine run more threads than it has CPUs (or one rank more than its
// CPU set), the first rank of that machine says so, once; returns the warning ("" if none).
// Collective over `comm`. Spinning OpenMP threads make that case ~10x slower, which is why
// sdp-train chooses a passive wait policy before it starts when it can foresee it
// (threads_oversubscribe_before_mpi).
std::string warn_if_cpus_oversubscribed(MPI_Comm comm, const MachineShare& share, int threads);

// Before MPI_Init, from what the launcher says (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS
// or Slurm's SLURM_STEP_TASKS_PER_NODE ranks on this host): would `threads` per rank exceed the
// machine's cores or this rank's CPU set?
bool threads_oversubscribe_before_mpi(int threads);

}  // namespace sdp
