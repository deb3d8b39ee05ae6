#include "distributed/replica_check.hpp"

#include <cstring>

#include "distributed/mpi_check.hpp"

namespace sdp {

namespace {
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull, kPrime2 = 0xC2B2AE3D27D4EB4Full;
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t lane(uint64_t h, uint64_t w) { return rotl(h ^ (w * kPrime2), 31) * kPrime1; }
}  // namespace

uint64_t checksum_bytes(const void* data, std::size_t nbytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h[4] = {kPrime1, kPrime2, kPrime1 ^ kPrime2, ~kPrime1};
  std::size_t i = 0;
  for (; i + 32 <= nbytes; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    for (int k = 0; k < 4; ++k) h[k] = lane(h[k], w[k]);
  }
  uint64_t out = nbytes * kPrime1;
  for (int k = 0; k < 4; ++k) out = lane(out, h[k]);
  for (; i < nbytes; ++i) out = lane(out, p[i]);
  out ^= out >> 33;
  out *= kPrime2;
  out ^= out >> 29;
  return out;
}

std::vector<int> ranks_differing_from_root(MPI_Comm comm, uint64_t checksum) {
  int size = 1;
  SDP_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<uint64_t> all(size);
  SDP_MPI_CHECK(MPI_Allgather(&checksum, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm));
  std::vector<int> differing;
  for (int r = 1; r < size; ++r)
    if (all[r] != all[0]) differing.push_back(r);
  return differing;
}

}  // namespace sdp
