#include "distributed/collectives.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "distributed/mpi_check.hpp"

namespace sdp {

namespace {
// MPI counts are int: larger buffers go in chunks.
constexpr int64_t kMaxChunk = INT_MAX / 2;
}  // namespace

void allreduce_mean(MPI_Comm comm, float* data, int64_t count) {
  int size = 1;
  SDP_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  for (int64_t begin = 0; begin < count; begin += kMaxChunk) {
    int n = static_cast<int>(std::min(kMaxChunk, count - begin));
    SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + begin, n, MPI_FLOAT, MPI_SUM, comm));
  }
  const float scale = 1.0f / static_cast<float>(size);
  for (int64_t i = 0; i < count; ++i) data[i] *= scale;
}

void allreduce_sum(MPI_Comm comm, double* data, int64_t count) {
  SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, comm));
}

void broadcast(MPI_Comm comm, float* data, int64_t count, int root) {
  for (int64_t begin = 0; begin < count; begin += kMaxChunk) {
    int n = static_cast<int>(std::min(kMaxChunk, count - begin));
    SDP_MPI_CHECK(MPI_Bcast(data + begin, n, MPI_FLOAT, root, comm));
  }
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
