// Blocking float collectives over MPI used by the training loop. The bucketed, overlapped
// gradient AllReduce (flat / ring / hierarchical) is built on top of these ideas in the
// data-parallel engine; these are the plain, always-correct versions.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

// In-place sum over `comm`, then multiplied by 1/size: the mean on every rank.
void allreduce_mean(MPI_Comm comm, float* data, int64_t count);
void allreduce_sum(MPI_Comm comm, double* data, int64_t count);
void broadcast(MPI_Comm comm, float* data, int64_t count, int root);
// Every rank's value, indexed by rank in `comm`. Strings are cut at 255 bytes.
std::vector<int> allgather_ints(MPI_Comm comm, int value);
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& value);

// Same 64-bit value on every rank? Returns the lowest rank whose value differs from rank 0's,
// or -1 when all agree.
int first_rank_differing(MPI_Comm comm, uint64_t value);

}  // namespace sdp
