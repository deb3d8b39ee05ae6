// Which device a rank computes on and with how many CPU threads (README, "Topology"):
// GPU = local_rank when the CUDA backend is built and the node has a GPU per rank, else CPU;
// CPU threads = the rank's CPUs / the ranks of its physical machine that share them, unless
// `threads` or OMP_NUM_THREADS says otherwise.
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
  int machine_ranks = 1;   // ranks on this rank's machine
  int sharing_ranks = 1;   // of those, the ranks whose CPU set is this rank's (itself included)
  int usable_cpus = 1;     // this rank's CPU set, capped by the cgroup quota
  int machine_cpus = 1;    // CPUs in the union of the machine's ranks' sets
  std::vector<int> machine_world_ranks;  // ascending; the first one speaks for the machine
  std::string host;        // this rank's host name, for messages
};

// Collective over `comm`.
MachineShare share_machine(MPI_Comm comm);

// CPU threads when neither `threads` nor OMP_NUM_THREADS is set.
int default_cpu_threads(const MachineShare& share);

struct DeviceAssignment {
  Device device;
  int threads = 1;
  int gpus_on_node = 0;
  std::string threads_source;  // "threads", "OMP_NUM_THREADS" or "CPUs / ranks sharing them"
};

// `preference` is the job's device key. Throws InputError when cuda is required but
// unavailable or the node has fewer GPUs than ranks. Pins the GPU.
DeviceAssignment assign_device(DevicePreference preference, int threads, const World& world,
                               const MachineShare& share);

// When the ranks of a machine run more threads than it has CPUs (or one rank more than its
// CPU set), the first rank of that machine says so, once; returns the warning ("" if none).
// Collective over `comm`. Spinning OpenMP threads make that case ~10x slower, which is why
// sdp-train chooses a passive wait policy before it starts when it can foresee it
// (threads_oversubscribe_before_mpi).
std::string warn_if_cpus_oversubscribed(MPI_Comm comm, const MachineShare& share, int threads);

// Before MPI_Init, from what the launcher says (OMPI_COMM_WORLD_LOCAL_SIZE or
// MPI_LOCALNRANKS ranks on this host): would `threads` per rank exceed the machine's cores or
// this rank's CPU set?
bool threads_oversubscribe_before_mpi(int threads);

}  // namespace sdp
