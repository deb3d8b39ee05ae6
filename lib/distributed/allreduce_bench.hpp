// `sdp-train bench allreduce`: every AllReduce algorithm side by side with the peer, Open
// MPI's own MPI_Allreduce ("mpi"), over a sweep of message sizes, in the nccl-tests format:
//   algbw = bytes / time, busbw = algbw * 2(n-1)/n (the per-link load of a ring: comparable
//   across world sizes), max_err = largest |result - exact sum| (inputs are small integers,
//   so an f32 sum is exact and any error is a bug; compression shows its rounding here).
// Buffers are in place and, by default, inside a SharedArena: where the trainer puts the
// gradient arena, so "hierarchical"/"auto" can take the shared-memory node phase.
// With device = cuda:local_rank (`--device cuda`) the buffers are GPU memory, the algorithms
// run over NCCL communicators, and the peer is ncclAllReduce alone ("nccl"); the ring, which
// is host-only, is left out. Rows through host memory follow: "mpi-staged" (Open MPI on
// pinned rounds), "hier-host" (across nodes: the inter-node phase on the hosts) and
// "host-bound" (the whole buffer to the host, MPI_Allreduce, back: what staging must beat).
// Ranks sharing a GPU (distributed.share_gpus) have no NCCL: the algorithms run staged over
// MPI and the peer is "host-bound".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "core/dtype.hpp"

namespace sdp {

class World;

struct AllreduceBenchOptions {
  int64_t min_bytes = 4 << 10;
  int64_t max_bytes = 256 << 20;
  int64_t factor = 2;  // size multiplier between rows
  int warmup = 3;
  int iters = 20;      // timed iterations up to 8 MiB; fewer above (at least 5), same bytes moved
  bool mpi_peer = true;  // a row of MPI_Allreduce ("mpi") before ours at each size
  std::vector<AllreduceKind> algorithms = {AllreduceKind::kFlat, AllreduceKind::kRing,
                                           AllreduceKind::kHierarchical, AllreduceKind::kAuto};
  Compression compression = Compression::kNone;  // applied to every algorithm but "mpi"
  bool shared_memory = true;         // buffers in a SharedArena (host buffers only)
  Device device = Device::cpu();     // cuda:i: GPU buffers, NCCL communicators
  // GPU buffers: the algorithms' backend (mpi when ranks share GPUs: staged through the host,
  // and the peer is the host bound) and their inter-node path (the job's, resolved).
  CommBackend gpu_backend = CommBackend::kNccl;
  InterNode inter_node = InterNode::kAuto;
};

struct AllreduceBenchRow {
  int64_t bytes = 0;
  int64_t count = 0;
  std::string algorithm;
  std::string ran;  // what "auto" chose; = algorithm otherwise
  double time_us = 0;
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  double max_error = 0;
  double vs_mpi = 0;  // busbw / busbw of the peer ("mpi", or "nccl" on GPUs) at the same size; 0 without it
};

struct AllreduceBenchResult {
  int ranks = 1, nodes = 1, local_size = 1;
  std::string peer;            // the MPI library's version string, or NCCL's on GPUs
  double node_copy_gbs = 0;    // memcpy read+write bandwidth of one node, all local ranks at once
  std::vector<AllreduceBenchRow> rows;
  AllreduceBenchOptions options;
};

// --algorithms: a comma-separated subset of mpi (the peer), flat, ring, hierarchical, auto.
// Sets options.mpi_peer and options.algorithms; throws InputError for another name.
void parse_bench_algorithms(const std::string& csv, AllreduceBenchOptions& options);

// Collective over the world. Throws InputError for a bad size range.
AllreduceBenchResult run_allreduce_benchmark(const World& world, const AllreduceBenchOptions& options);
// The table (rank 0 prints it; every rank may call this).
std::string format_allreduce_table(const AllreduceBenchResult& result);

}  // namespace sdp
