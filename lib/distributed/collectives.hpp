// Control-plane collectives over MPI: small values the ranks must agree on (loss and
// evaluation sums, topology integers, host names, fingerprints). They stay raw MPI on
// purpose: MPI is the control plane under every backend (docs/architecture.md, "Communicators").
// Model data (gradients, parameters, buffers) never goes through here: it moves through a
// Communicator (communicator_factory.hpp), so it follows the backend (NCCL: device memory).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

// In-place sum of a few doubles over `comm`.
void allreduce_sum(MPI_Comm comm, double* data, int64_t count);
// Every rank's value, indexed by rank in `comm`. Strings are cut at 255 bytes.
std::vector<int> allgather_ints(MPI_Comm comm, int value);
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& value);
// `value` of rank `root` on every rank (any length: checkpoint metadata, a few KB).
std::string broadcast_string(MPI_Comm comm, const std::string& value, int root = 0);

// Every rank's `value` on rank `root`, indexed by rank (other ranks get an empty vector).
// Any length (a timeline: MBs per rank): sent in pieces below MPI's int count limit.
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& value, int root = 0);

// Same 64-bit value on every rank? Returns the lowest rank whose value differs from rank 0's,
// or -1 when all agree.
int first_rank_differing(MPI_Comm comm, uint64_t value);

}  // namespace sdp
