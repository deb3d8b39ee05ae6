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

}  // namespace

World World::create(const TopologyOptions& options) {
  World w;
  SDP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank_));
  SDP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w.size_));
  w.rank_hosts_ = allgather_strings(MPI_COMM_WORLD, host_name());

  // Which ranks really share a machine: the lowest world rank of my shared-memory group.
  MPI_Comm shared;
  SDP_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank_, MPI_INFO_NULL, &shared));
  int shared_leader = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&w.rank_, &shared_leader, 1, MPI_INT, MPI_MIN, shared));
  MPI_Comm_free(&shared);
  const std::vector<int> leaders = allgather_ints(MPI_COMM_WORLD, shared_leader);

  std::vector<int> node_of(w.size_);
  if (options.ranks_per_node > 0) {
    const int rpn = options.ranks_per_node;
    if (w.size_ % rpn != 0)
      throw InputError("distributed.ranks_per_node = " + std::to_string(rpn) +
                       " does not divide the world size " + std::to_string(w.size_) +
                       " (every node must run the same number of ranks)");
    for (int r = 0; r < w.size_; ++r) node_of[r] = r / rpn;
    w.nodes_ = w.size_ / rpn;
    for (int n = 0; n < w.nodes_; ++n)
      w.node_names_.push_back(w.rank_hosts_[n * rpn] + (w.nodes_ > 1 ? "/node" + std::to_string(n) : ""));
    w.grouping_ = "distributed.ranks_per_node=" + std::to_string(rpn);
  } else if (options.resource_config) {
    const ResourceConfig& rc = *options.resource_config;
    w.node_names_ = rc.hosts;
    w.nodes_ = static_cast<int>(rc.hosts.size());
    node_of = allgather_ints(MPI_COMM_WORLD, rc.host_index());
    // Every rank must have read the same host list.
    std::string hosts_joined;
    for (const auto& h : rc.hosts) hosts_joined += h + ",";
    const auto all_lists = allgather_strings(MPI_COMM_WORLD, hosts_joined);
    for (int r = 1; r < w.size_; ++r)
      if (all_lists[r] != all_lists[0])
        throw InputError(rc.source + ": key 'hosts' differs between rank 0 [" + all_lists[0] +
                         "] and rank " + std::to_string(r) + " [" + all_lists[r] + "]");
    for (int r = 0; r < w.size_; ++r)
      if (node_of[r] != node_of[leaders[r]])
        throw InputError(rc.source + ": key 'current_host' says '" + rc.hosts[node_of[r]] +
                         "' on rank " + std::to_string(r) + " but '" + rc.hosts[node_of[leaders[r]]] +
                         "' on rank " + std::to_string(leaders[r]) +
                         ", which runs on the same machine (" + w.rank_hosts_[r] + ")");
    w.grouping_ = "resourceconfig " + rc.source;
  } else {
    std::vector<int> distinct(leaders.begin(), leaders.end());
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int r = 0; r < w.size_; ++r)
      node_of[r] = static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), leaders[r]) -
                                    distinct.begin());
    w.nodes_ = static_cast<int>(distinct.size());
    for (int leader : distinct) w.node_names_.push_back(w.rank_hosts_[leader]);
    w.grouping_ = "shared memory (MPI_COMM_TYPE_SHARED)";
  }

  std::vector<int> ranks_on(w.nodes_, 0);
  for (int r = 0; r < w.size_; ++r) ranks_on[node_of[r]]++;
  for (int n = 0; n < w.nodes_; ++n) {
    if (ranks_on[n] == 0)
      throw InputError("host '" + w.node_names_[n] + "' (node " + std::to_string(n) +
                       ") has no ranks: the world has " + std::to_string(w.size_) + " ranks for " +
                       std::to_string(w.nodes_) + " hosts (" + w.grouping_ + ")");
    if (ranks_on[n] != ranks_on[0])
      throw InputError("every node must run the same number of ranks, but the ranks per node are [" +
                       join_ints(ranks_on) + "] (" + w.grouping_ + ")");
  }

  w.node_ = node_of[w.rank_];
  w.rank_nodes_ = node_of;
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
