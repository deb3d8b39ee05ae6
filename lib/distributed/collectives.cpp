#include "distributed/collectives.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "distributed/mpi_check.hpp"

namespace sdp {

void allreduce_sum(MPI_Comm comm, double* data, int64_t count) {
  SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, comm));
}

std::vector<int> allgather_ints(MPI_Comm comm, int value) {
  int size = 1;
  SDP_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<int> all(size);
  SDP_MPI_CHECK(MPI_Allgather(&value, 1, MPI_INT, all.data(), 1, MPI_INT, comm));
  return all;
}

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& value) {
  constexpr int kWidth = 256;
  int size = 1;
  SDP_MPI_CHECK(MPI_Comm_size(comm, &size));
  char mine[kWidth] = {0};
  std::strncpy(mine, value.c_str(), kWidth - 1);
  std::vector<char> all(static_cast<std::size_t>(kWidth) * size);
  SDP_MPI_CHECK(MPI_Allgather(mine, kWidth, MPI_CHAR, all.data(), kWidth, MPI_CHAR, comm));
  std::vector<std::string> out(size);
  for (int r = 0; r < size; ++r) out[r] = std::string(&all[static_cast<std::size_t>(r) * kWidth]);
  return out;
}

std::string broadcast_string(MPI_Comm comm, const std::string& value, int root) {
  uint64_t size = value.size();
  SDP_MPI_CHECK(MPI_Bcast(&size, 1, MPI_UINT64_T, root, comm));
  std::string out = value;
  out.resize(size);
  if (size > 0) SDP_MPI_CHECK(MPI_Bcast(out.data(), static_cast<int>(size), MPI_CHAR, root, comm));
  return out;
}

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& value, int root) {
  constexpr uint64_t kPiece = uint64_t{1} << 30;
  constexpr int kTag = 7301;
  int rank = 0, size = 1;
  SDP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  SDP_MPI_CHECK(MPI_Comm_size(comm, &size));
  uint64_t mine = value.size();
  std::vector<uint64_t> sizes(rank == root ? size : 0);
  SDP_MPI_CHECK(MPI_Gather(&mine, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, root, comm));
  if (rank != root) {
    for (uint64_t at = 0; at < mine; at += kPiece)
      SDP_MPI_CHECK(MPI_Send(value.data() + at, static_cast<int>(std::min(kPiece, mine - at)),
                             MPI_CHAR, root, kTag, comm));
    return {};
  }
  std::vector<std::string> out(size);
  for (int r = 0; r < size; ++r) {
    if (r == root) {
      out[r] = value;
      continue;
    }
    out[r].resize(sizes[r]);
    for (uint64_t at = 0; at < sizes[r]; at += kPiece)
      SDP_MPI_CHECK(MPI_Recv(out[r].data() + at, static_cast<int>(std::min(kPiece, sizes[r] - at)),
                             MPI_CHAR, r, kTag, comm, MPI_STATUS_IGNORE));
  }
  return out;
}

int first_rank_differing(MPI_Comm comm, uint64_t value) {
  int size = 1;
  SDP_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<uint64_t> all(size);
  SDP_MPI_CHECK(MPI_Allgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm));
  for (int r = 1; r < size; ++r)
    if (all[r] != all[0]) return r;
  return -1;
}

}  // namespace sdp
