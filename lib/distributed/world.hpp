// World: this process's place in the job. Rank and size over MPI_COMM_WORLD, the grouping
// of ranks into nodes, and two sub-communicators (Horovod's LOCAL and CROSS):
//   intra: the ranks of my node, ordered by rank (my index there is local_rank);
//   inter: the ranks with my local_rank on every node (my index there is node).
//
// Node grouping, first that applies:
//   1. distributed.ranks_per_node > 0: node = rank / ranks_per_node (one machine can act
//      as several nodes, for tests and study);
//   2. a SageMaker resourceconfig: node = index of current_host in hosts;
//   3. MPI_COMM_TYPE_SHARED: ranks that share memory form a node.
// Every node must run the same number of ranks. create() is collective: every rank of
// MPI_COMM_WORLD must call it, and every rank raises the same error on a bad topology.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "config/sagemaker_env.hpp"

namespace sdp {

// Starts MPI (requesting MPI_THREAD_SERIALIZED; a process started without mpirun becomes a
// world of size 1) unless it is already running. Safe to call more than once.
void init_mpi(int* argc, char*** argv);
void finalize_mpi();
bool mpi_is_initialized();

// Ends the whole job from this rank: says so on stderr in one line the launcher wrapper reads
// ("sdp-train: rank R ends the job with exit status N (MPI_Abort)"; scripts/sdp-launch, which
// ends a launcher still waiting for an unreachable host), then MPI_Abort(MPI_COMM_WORLD, N).
// Without MPI, or should MPI_Abort return, the process exits N.
[[noreturn]] void abort_job(int exit_code);

// The rank the launcher assigned, read from its environment before MPI starts (so errors
// found before MPI_Init are printed by one rank only). -1 when not launched by one.
int launcher_rank();

struct TopologyOptions {
  int ranks_per_node = 0;  // 0 = detect
  std::optional<ResourceConfig> resource_config;
};

class World {
 public:
  static World create(const TopologyOptions& options);
  World(World&& other) noexcept;
  World& operator=(World&&) = delete;
  World(const World&) = delete;
  ~World();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int node() const { return node_; }
  int nodes() const { return nodes_; }
  // Name of each node (SageMaker host name, or the host name of its first rank).
  const std::vector<std::string>& node_names() const { return node_names_; }
  const std::string& node_name() const { return node_names_[node_]; }
  // Real host name of every rank, indexed by rank.
  const std::vector<std::string>& rank_hosts() const { return rank_hosts_; }
  // The node of every rank, indexed by rank.
  const std::vector<int>& rank_nodes() const { return rank_nodes_; }
  // How the node grouping was decided, for the plan printout.
  const std::string& grouping() const { return grouping_; }

  MPI_Comm comm() const { return MPI_COMM_WORLD; }
  MPI_Comm intra() const { return intra_; }
  MPI_Comm inter() const { return inter_; }

 private:
  World() = default;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_ = 0, nodes_ = 1;
  std::vector<std::string> node_names_, rank_hosts_;
  std::vector<int> rank_nodes_;
  std::string grouping_;
  MPI_Comm intra_ = MPI_COMM_NULL, inter_ = MPI_COMM_NULL;
};

}  // namespace sdp
