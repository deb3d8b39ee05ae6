#include "ctr/sharded_rows.hpp"

#include <mpi.h>

#include <climits>
#include <cstring>
#include <numeric>
#include <string>

#include "core/error.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/world.hpp"

namespace sdp {

namespace {

// MPI's counts are ints: a step's rows beyond that is a batch no table exchange should carry.
int mpi_count(int64_t n, const char* what) {
  if (n > INT_MAX)
    throw RuntimeError(std::string("sharded table: ") + what + " of " + std::to_string(n) +
                       " values in one step exceeds MPI's count limit: lower data.batch_size");
  return static_cast<int>(n);
}

void exclusive_sum(const std::vector<int>& counts, std::vector<int>& offsets) {
  offsets.resize(counts.size());
  int64_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = mpi_count(at, "rows");
    at += counts[r];
  }
  mpi_count(at, "rows");
}

void scaled(const std::vector<int>& counts, int width, std::vector<int>& out) {
  out.resize(counts.size());
  for (size_t r = 0; r < counts.size(); ++r) out[r] = mpi_count(static_cast<int64_t>(counts[r]) * width, "rows");
}

}  // namespace

ShardedRows::ShardedRows(const World& world, int width)
    : world_(world), width_(width), shard_{world.rank(), world.size()} {
  node_sums_.resize(static_cast<size_t>(world.nodes()));
}

TableShard ShardedRows::shard() const { return shard_; }

void ShardedRows::fetch(const int64_t* ids, int64_t count, const float* shard_table) {
  const int world = world_.size();
  // The batch's unique ids in first-seen order, then grouped by owner (stably).
  dedupe_.reset(0, count);
  const uint32_t* first_seen = dedupe_.assign_slots(ids, count);
  const std::vector<int64_t>& unique = dedupe_.rows().ids;
  const auto u = static_cast<int64_t>(unique.size());
  send_counts_.assign(static_cast<size_t>(world), 0);
  for (int64_t id : unique) ++send_counts_[static_cast<size_t>(shard_.owner(id))];
  exclusive_sum(send_counts_, send_offsets_);
  std::vector<int> fill = send_offsets_;
  send_ids_.resize(static_cast<size_t>(u));
  slot_of_first_seen_.resize(static_cast<size_t>(u));
  for (int64_t s = 0; s < u; ++s) {
    const int at = fill[static_cast<size_t>(shard_.owner(unique[s]))]++;
    send_ids_[static_cast<size_t>(at)] = unique[s];
    slot_of_first_seen_[static_cast<size_t>(s)] = at;
  }
  slots_.resize(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) slots_[p] = slot_of_first_seen_[first_seen[p] & ~RowAccumulator::kNewSlot];

  // Each owner learns which of its rows every rank reads, and serves them.
  recv_counts_.resize(static_cast<size_t>(world));
  SDP_MPI_CHECK(MPI_Alltoall(send_counts_.data(), 1, MPI_INT, recv_counts_.data(), 1, MPI_INT, world_.comm()));
  exclusive_sum(recv_counts_, recv_offsets_);
  const int64_t asked = static_cast<int64_t>(recv_offsets_.back()) + recv_counts_.back();
  recv_ids_.resize(static_cast<size_t>(asked));
  SDP_MPI_CHECK(MPI_Alltoallv(send_ids_.data(), send_counts_.data(), send_offsets_.data(), MPI_INT64_T,
                              recv_ids_.data(), recv_counts_.data(), recv_offsets_.data(), MPI_INT64_T,
                              world_.comm()));
  served_.resize(static_cast<size_t>(asked * width_));
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(width_);
  for (int64_t i = 0; i < asked; ++i)
    std::memcpy(served_.data() + i * width_, shard_table + shard_.local_row(recv_ids_[i]) * width_, row_bytes);
  scaled(send_counts_, width_, row_counts_);
  scaled(recv_counts_, width_, row_recv_counts_);
  exclusive_sum(row_counts_, row_offsets_);
  exclusive_sum(row_recv_counts_, row_recv_offsets_);
  rows_.resize(static_cast<size_t>(u * width_));
  SDP_MPI_CHECK(MPI_Alltoallv(served_.data(), row_recv_counts_.data(), row_recv_offsets_.data(), MPI_FLOAT,
                              rows_.data(), row_counts_.data(), row_offsets_.data(), MPI_FLOAT, world_.comm()));
  bytes_received_ = asked * static_cast<int64_t>(sizeof(int64_t)) + u * static_cast<int64_t>(row_bytes);
}

void ShardedRows::reduce(const SparseRows& by_slot, RowAccumulator& out) {
  const int64_t u = unique();
  if (by_slot.size() != u || by_slot.width != width_)
    throw std::logic_error("ShardedRows::reduce: " + std::to_string(by_slot.size()) + " gradient rows for " +
                           std::to_string(u) + " fetched rows");
  // In slot order: each owner's part contiguous, as the ids went.
  sent_grads_.resize(static_cast<size_t>(u * width_));
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(width_);
  for (int64_t i = 0; i < u; ++i) std::memcpy(sent_grads_.data() + by_slot.ids[i] * width_, by_slot.row(i), row_bytes);
  const int64_t asked = static_cast<int64_t>(recv_ids_.size());
  received_grads_.resize(static_cast<size_t>(asked * width_));
  SDP_MPI_CHECK(MPI_Alltoallv(sent_grads_.data(), row_counts_.data(), row_offsets_.data(), MPI_FLOAT,
                              received_grads_.data(), row_recv_counts_.data(), row_recv_offsets_.data(), MPI_FLOAT,
                              world_.comm()));
  bytes_received_ += asked * static_cast<int64_t>(row_bytes);
  recv_rows_.resize(static_cast<size_t>(asked));
  for (int64_t i = 0; i < asked; ++i) recv_rows_[i] = shard_.local_row(recv_ids_[i]);
  const auto add_rank = [&](RowAccumulator& sum, int rank) {
    const int at = recv_offsets_[static_cast<size_t>(rank)];
    sum.add_rows(recv_rows_.data() + at, received_grads_.data() + static_cast<int64_t>(at) * width_,
                 recv_counts_[static_cast<size_t>(rank)]);
  };
  out.reset(width_, asked);
  if (world_.nodes() == 1) {
    for (int r = 0; r < world_.size(); ++r) add_rank(out, r);
    return;
  }
  for (int n = 0; n < world_.nodes(); ++n) {
    RowAccumulator& node = node_sums_[static_cast<size_t>(n)];
    node.reset(width_, asked);
    for (int r = 0; r < world_.size(); ++r)
      if (world_.rank_nodes()[static_cast<size_t>(r)] == n) add_rank(node, r);
    out.add_all(node.rows());
  }
}

}  // namespace sdp
