#include "distributed/world.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "distributed/collectives.hpp"
#include "distributed/mpi_check.hpp"

namespace sdp {

namespace detail {
void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw RuntimeError(std::string("MPI call ") + call + " failed: " + text + " (" + file + ":" +
                     std::to_string(line) + ")");
}
}  // namespace detail

bool mpi_is_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void abort_job(int exit_code) {
  if (mpi_is_initialized()) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "sdp-train: rank %d ends the job with exit status %d (MPI_Abort)\n", rank, exit_code);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  _exit(exit_code);
}

void init_mpi(int* argc, char*** argv) {
  if (mpi_is_initialized()) return;
  // Open MPI's TCP transport over one connection a peer reaches about half a full-duplex
  // link's rate where both ends send at once (every AllReduce step; 16 MiB on 2 simulated
  // hosts at 1 Gbit/s: 253 ms, against 140 ms through the runner's socket ring); with two
  // connections it reaches 155 ms. A launcher's or user's own setting is kept.
  setenv("OMPI_MCA_btl_tcp_links", "2", 0);
  // SERIALIZED: the step loop and the communication thread never call MPI at the same
  // time; asking for MULTIPLE would slow every call down in Open MPI.
  int provided = 0;
  SDP_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  if (provided < MPI_THREAD_SERIALIZED)
    throw RuntimeError("the MPI library provides thread level " + std::to_string(provided) +
                       " but sdp-train needs MPI_THREAD_SERIALIZED");
  // Errors come back as codes (turned into exceptions with context) instead of aborting
  // inside MPI with a message that names no step or cause.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void finalize_mpi() {
  if (mpi_is_initialized()) MPI_Finalize();
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return -1;
}

namespace {

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

// Which node each rank is on, the nodes' names, and what decided it.
struct NodeAssignment {
  std::vector<int> node_of;
  std::vector<std::string> names;
  std::string grouping;
  int nodes() const { return static_cast<int>(names.size()); }
};

// Which ranks really share a machine: for every rank, the lowest world rank of its
// shared-memory group.
std::vector<int> shared_memory_leaders(int rank) {
  MPI_Comm shared;
  SDP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared));
  int shared_leader = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&rank, &shared_leader, 1, MPI_INT, MPI_MIN, shared));
  MPI_Comm_free(&shared);
  return allgather_ints(MPI_COMM_WORLD, shared_leader);
}

// distributed.ranks_per_node: consecutive ranks, rpn to a node.
NodeAssignment nodes_by_count(int rpn, const std::vector<std::string>& rank_hosts) {
  const int size = static_cast<int>(rank_hosts.size());
  if (size % rpn != 0)
    throw InputError("distributed.ranks_per_node = " + std::to_string(rpn) + " does not divide the world size " +
                     std::to_string(size) + " (every node must run the same number of ranks)");
  NodeAssignment a;
  for (int r = 0; r < size; ++r) a.node_of.push_back(r / rpn);
  const int nodes = size / rpn;
  for (int n = 0; n < nodes; ++n)
    a.names.push_back(rank_hosts[n * rpn] + (nodes > 1 ? "/node" + std::to_string(n) : ""));
  a.grouping = "distributed.ranks_per_node=" + std::to_string(rpn);
  return a;
}

// SageMaker's resourceconfig.json: each rank's current_host, the same host list everywhere,
// and ranks on one machine on one host.
NodeAssignment nodes_by_resource_config(const ResourceConfig& rc, const std::vector<int>& leaders,
                                        const std::vector<std::string>& rank_hosts) {
  const int size = static_cast<int>(rank_hosts.size());
  NodeAssignment a;
  a.names = rc.hosts;
  a.node_of = allgather_ints(MPI_COMM_WORLD, rc.host_index());
  std::string hosts_joined;
  for (const auto& h : rc.hosts) hosts_joined += h + ",";
  const auto all_lists = allgather_strings(MPI_COMM_WORLD, hosts_joined);
  for (int r = 1; r < size; ++r)
    if (all_lists[r] != all_lists[0])
      throw InputError(rc.source + ": key 'hosts' differs between rank 0 [" + all_lists[0] + "] and rank " +
                       std::to_string(r) + " [" + all_lists[r] + "]");
  for (int r = 0; r < size; ++r)
    if (a.node_of[r] != a.node_of[leaders[r]])
      throw InputError(rc.source + ": key 'current_host' says '" + rc.hosts[a.node_of[r]] + "' on rank " +
                       std::to_string(r) + " but '" + rc.hosts[a.node_of[leaders[r]]] + "' on rank " +
                       std::to_string(leaders[r]) + ", which runs on the same machine (" + rank_hosts[r] + ")");
  a.grouping = "resourceconfig " + rc.source;
  return a;
}

// One node per shared-memory group, numbered by their lowest ranks.
NodeAssignment nodes_by_shared_memory(const std::vector<int>& leaders, const std::vector<std::string>& rank_hosts) {
  std::vector<int> distinct(leaders.begin(), leaders.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  NodeAssignment a;
  for (int leader : leaders)
    a.node_of.push_back(static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), leader) -
                                         distinct.begin()));
  for (int leader : distinct) a.names.push_back(rank_hosts[leader]);
  a.grouping = "shared memory (MPI_COMM_TYPE_SHARED)";
  return a;
}

// Every node runs ranks, and the same number of them.
void check_ranks_per_node(const NodeAssignment& a) {
  std::vector<int> ranks_on(a.nodes(), 0);
  for (int node : a.node_of) ranks_on[node]++;
  for (int n = 0; n < a.nodes(); ++n) {
    if (ranks_on[n] == 0)
      throw InputError("host '" + a.names[n] + "' (node " + std::to_string(n) + ") has no ranks: the world has " +
                       std::to_string(a.node_of.size()) + " ranks for " + std::to_string(a.nodes()) + " hosts (" +
                       a.grouping + ")");
    if (ranks_on[n] != ranks_on[0])
      throw InputError("every node must run the same number of ranks, but the ranks per node are [" +
                       join_ints(ranks_on) + "] (" + a.grouping + ")");
  }
}

}  // namespace

World World::create(const TopologyOptions& options) {
  World w;
  SDP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank_));
  SDP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w.size_));
  w.rank_hosts_ = allgather_strings(MPI_COMM_WORLD, host_name());
  const std::vector<int> leaders = shared_memory_leaders(w.rank_);
  const NodeAssignment a = options.ranks_per_node > 0 ? nodes_by_count(options.ranks_per_node, w.rank_hosts_)
                           : options.resource_config
                               ? nodes_by_resource_config(*options.resource_config, leaders, w.rank_hosts_)
                               : nodes_by_shared_memory(leaders, w.rank_hosts_);
  check_ranks_per_node(a);
  w.nodes_ = a.nodes();
  w.node_names_ = a.names;
  w.grouping_ = a.grouping;
  w.rank_nodes_ = a.node_of;
  w.node_ = a.node_of[w.rank_];
  SDP_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, w.node_, w.rank_, &w.intra_));
  SDP_MPI_CHECK(MPI_Comm_rank(w.intra_, &w.local_rank_));
  SDP_MPI_CHECK(MPI_Comm_size(w.intra_, &w.local_size_));
  SDP_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, w.local_rank_, w.node_, &w.inter_));
  set_log_rank(w.rank_);
  return w;
}

World::World(World&& other) noexcept
    : rank_(other.rank_),
      size_(other.size_),
      local_rank_(other.local_rank_),
      local_size_(other.local_size_),
      node_(other.node_),
      nodes_(other.nodes_),
      node_names_(std::move(other.node_names_)),
      rank_hosts_(std::move(other.rank_hosts_)),
      rank_nodes_(std::move(other.rank_nodes_)),
      grouping_(std::move(other.grouping_)),
      intra_(other.intra_),
      inter_(other.inter_) {
  other.intra_ = MPI_COMM_NULL;
  other.inter_ = MPI_COMM_NULL;
}

World::~World() {
  if (!mpi_is_initialized()) return;
  if (intra_ != MPI_COMM_NULL) MPI_Comm_free(&intra_);
  if (inter_ != MPI_COMM_NULL) MPI_Comm_free(&inter_);
}

}  // namespace sdp
