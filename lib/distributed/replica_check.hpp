// Replica check (distributed.check_every_steps): data-parallel replicas must hold bitwise
// equal parameters after every step. Each rank hashes its parameter arena; rank 0's hash
// is the reference, and every rank learns which ranks differ. Control plane: only the
// hashes cross (raw MPI); the parameters themselves never move here.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdp {

// 64-bit hash of raw bytes (4 multiply-xor lanes over 8-byte words, ~10 GB/s; not
// cryptographic, but any flipped bit changes it).
uint64_t checksum_bytes(const void* data, std::size_t nbytes);

// Collective over `comm`: the ranks (in comm) whose checksum differs from rank 0's, in
// ascending order; empty when all replicas agree. Same answer on every rank.
std::vector<int> ranks_differing_from_root(MPI_Comm comm, uint64_t checksum);

inline std::vector<int> check_replicas(MPI_Comm comm, const void* data, std::size_t nbytes) {
  return ranks_differing_from_root(comm, checksum_bytes(data, nbytes));
}

}  // namespace sdp
