#include "ctr/sharded_rows.hpp"

#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/world.hpp"

namespace sdp {

namespace {

// MPI's counts are ints: a step's rows beyond that is a batch no table exchange should carry.
int mpi_count(int64_t n) {
  if (n > INT_MAX)
    throw RuntimeError("sharded table: " + std::to_string(n) +
                       " values in one step's exchange exceed MPI's count limit: lower data.batch_size");
  return static_cast<int>(n);
}

void exclusive_sum(const std::vector<int>& counts, std::vector<int>& offsets) {
  offsets.resize(counts.size());
  int64_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = mpi_count(at);
    at += counts[r];
  }
  mpi_count(at);
}

void scaled(const std::vector<int>& counts, int width, std::vector<int>& out) {
  out.resize(counts.size());
  for (size_t r = 0; r < counts.size(); ++r) out[r] = mpi_count(static_cast<int64_t>(counts[r]) * width);
}

// Orders `ids` by `group` (stably) into `out` with each group's count in `counts` (sized
// `groups`), and each id's place in `out` into `place`.
template <typename Group>
void group_ids(const std::vector<int64_t>& ids, int groups, Group group, std::vector<int64_t>& out,
               std::vector<int>& counts, std::vector<int>& fill, std::vector<int64_t>& place) {
  counts.assign(static_cast<size_t>(groups), 0);
  for (int64_t id : ids) ++counts[static_cast<size_t>(group(id))];
  exclusive_sum(counts, fill);
  out.resize(ids.size());
  place.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int at = fill[static_cast<size_t>(group(ids[i]))]++;
    out[static_cast<size_t>(at)] = ids[i];
    place[i] = at;
  }
}

}  // namespace

int64_t ShardedRows::Layout::received() const {
  return recv_counts.empty() ? 0 : static_cast<int64_t>(recv_offsets.back()) + recv_counts.back();
}

void ShardedRows::Layout::agree(MPI_Comm with, int width) {
  comm = with;
  recv_counts.resize(send_counts.size());
  SDP_MPI_CHECK(MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm));
  exclusive_sum(send_counts, send_offsets);
  exclusive_sum(recv_counts, recv_offsets);
  scaled(send_counts, width, row_send_counts);
  scaled(recv_counts, width, row_recv_counts);
  exclusive_sum(row_send_counts, row_send_offsets);
  exclusive_sum(row_recv_counts, row_recv_offsets);
}

void ShardedRows::Layout::ids(const int64_t* send, int64_t* recv) const {
  SDP_MPI_CHECK(MPI_Alltoallv(send, send_counts.data(), send_offsets.data(), MPI_INT64_T, recv, recv_counts.data(),
                              recv_offsets.data(), MPI_INT64_T, comm));
}

void ShardedRows::Layout::rows(const float* send, float* recv) const {
  SDP_MPI_CHECK(MPI_Alltoallv(send, row_send_counts.data(), row_send_offsets.data(), MPI_FLOAT, recv,
                              row_recv_counts.data(), row_recv_offsets.data(), MPI_FLOAT, comm));
}

void ShardedRows::Layout::rows_back(const float* send, float* recv) const {
  SDP_MPI_CHECK(MPI_Alltoallv(send, row_recv_counts.data(), row_recv_offsets.data(), MPI_FLOAT, recv,
                              row_send_counts.data(), row_send_offsets.data(), MPI_FLOAT, comm));
}

ShardedRows::ShardedRows(const World& world, int width)
    : world_(world), width_(width), shard_{world.rank(), world.size()}, local_(world.local_size()) {}

void ShardedRows::fetch(const int64_t* ids, int64_t count, const float* shard_table) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(width_);
  // The batch's unique ids in first-seen order, then grouped by forwarder (the slots).
  dedupe_.reset(0, count);
  const uint32_t* first_seen = dedupe_.assign_slots(ids, count);
  const int local = local_;
  const TableShard shard = shard_;
  const auto forwarder = [shard, local](int64_t id) { return shard.owner(id) % local; };
  group_ids(dedupe_.rows().ids, local, forwarder, send_ids_, to_forwarders_.send_counts, fill_, node_slot_);
  slots_.resize(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) slots_[p] = node_slot_[first_seen[p] & ~RowAccumulator::kNewSlot];

  // The forwarders: the node's requests deduplicated, grouped by owner. One rank a node is its
  // own forwarder, its ids already unique.
  const auto owner = [shard](int64_t id) { return shard.owner(id); };
  if (local > 1) {
    to_forwarders_.agree(world_.intra(), width_);
    node_ids_.resize(static_cast<size_t>(to_forwarders_.received()));
    to_forwarders_.ids(send_ids_.data(), node_ids_.data());
    node_dedupe_.reset(0, static_cast<int64_t>(node_ids_.size()));
    const uint32_t* node_first_seen = node_dedupe_.assign_slots(node_ids_.data(), static_cast<int64_t>(node_ids_.size()));
    group_ids(node_dedupe_.rows().ids, world_.size(), owner, owner_ids_, to_owners_.send_counts, fill_, place_);
    node_slot_.resize(node_ids_.size());
    for (size_t i = 0; i < node_ids_.size(); ++i) node_slot_[i] = place_[node_first_seen[i] & ~RowAccumulator::kNewSlot];
  } else {
    group_ids(send_ids_, world_.size(), owner, owner_ids_, to_owners_.send_counts, fill_, node_slot_);
  }
  // The owners serve their rows.
  to_owners_.agree(world_.comm(), width_);
  asked_ids_.resize(static_cast<size_t>(to_owners_.received()));
  to_owners_.ids(owner_ids_.data(), asked_ids_.data());
  served_.resize(asked_ids_.size() * static_cast<size_t>(width_));
  for (size_t i = 0; i < asked_ids_.size(); ++i)
    std::memcpy(served_.data() + i * width_, shard_table + shard_.local_row(asked_ids_[i]) * width_, row_bytes);
  owner_rows_.resize(owner_ids_.size() * static_cast<size_t>(width_));
  to_owners_.rows_back(served_.data(), owner_rows_.data());
  // Back to the ranks that asked: each request's row, in the order it came.
  const size_t asked_of_me = local > 1 ? node_ids_.size() : send_ids_.size();
  std::vector<float>& answers = local > 1 ? node_rows_ : rows_;  // one rank a node: its own slots
  answers.resize(asked_of_me * static_cast<size_t>(width_));
  float* to = answers.data();
  for (size_t i = 0; i < asked_of_me; ++i)
    std::memcpy(to + i * width_, owner_rows_.data() + node_slot_[i] * width_, row_bytes);
  if (local > 1) {
    rows_.resize(send_ids_.size() * static_cast<size_t>(width_));
    to_forwarders_.rows_back(node_rows_.data(), rows_.data());
  }
  const auto id_bytes = static_cast<int64_t>(sizeof(int64_t)), row = static_cast<int64_t>(row_bytes);
  bytes_received_ = static_cast<int64_t>(asked_ids_.size()) * id_bytes + static_cast<int64_t>(owner_ids_.size()) * row;
  if (local > 1)
    bytes_received_ += static_cast<int64_t>(node_ids_.size()) * id_bytes + static_cast<int64_t>(send_ids_.size()) * row;
}

void ShardedRows::reduce(const SparseRows& by_slot, RowAccumulator& out) {
  const int64_t u = unique();
  if (by_slot.size() != u || by_slot.width != width_)
    throw std::logic_error("ShardedRows::reduce: " + std::to_string(by_slot.size()) + " gradient rows for " +
                           std::to_string(u) + " fetched rows");
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(width_);
  // In slot order: each forwarder's part contiguous, as the ids went.
  sent_grads_.resize(static_cast<size_t>(u * width_));
  for (int64_t i = 0; i < u; ++i) std::memcpy(sent_grads_.data() + by_slot.ids[i] * width_, by_slot.row(i), row_bytes);
  // The forwarders sum their node's rows of an id in local-rank order (the order they came).
  owner_grads_.resize(owner_ids_.size() * static_cast<size_t>(width_));
  if (local_ > 1) {
    node_grads_.resize(node_ids_.size() * static_cast<size_t>(width_));
    to_forwarders_.rows(sent_grads_.data(), node_grads_.data());
    bytes_received_ += static_cast<int64_t>(node_ids_.size() * row_bytes);
    node_sums_.reset(width_, static_cast<int64_t>(owner_ids_.size()));
    node_sums_.add_rows(node_slot_.data(), node_grads_.data(), static_cast<int64_t>(node_ids_.size()));
    const SparseRows& sums = node_sums_.rows();
    for (int64_t i = 0; i < sums.size(); ++i)
      std::memcpy(owner_grads_.data() + sums.ids[static_cast<size_t>(i)] * width_, sums.row(i), row_bytes);
  } else {
    for (size_t i = 0; i < send_ids_.size(); ++i)
      std::memcpy(owner_grads_.data() + node_slot_[i] * width_, sent_grads_.data() + i * width_, row_bytes);
  }
  // Each owner sums the nodes' sums in node order (one forwarder a node sends an id).
  asked_grads_.resize(asked_ids_.size() * static_cast<size_t>(width_));
  to_owners_.rows(owner_grads_.data(), asked_grads_.data());
  bytes_received_ += static_cast<int64_t>(asked_ids_.size() * row_bytes);
  asked_rows_.resize(asked_ids_.size());
  for (size_t i = 0; i < asked_ids_.size(); ++i) asked_rows_[i] = shard_.local_row(asked_ids_[i]);
  out.reset(width_, static_cast<int64_t>(asked_ids_.size()));
  for (int n = 0; n < world_.nodes(); ++n)
    for (int r = 0; r < world_.size(); ++r) {
      if (world_.rank_nodes()[static_cast<size_t>(r)] != n) continue;
      const int at = to_owners_.recv_offsets[static_cast<size_t>(r)];
      out.add_rows(asked_rows_.data() + at, asked_grads_.data() + static_cast<int64_t>(at) * width_,
                   to_owners_.recv_counts[static_cast<size_t>(r)]);
    }
}

}  // namespace sdp
