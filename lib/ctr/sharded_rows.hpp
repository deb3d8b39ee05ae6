// A row-sharded table's traffic (model.embedding_sharding: rows; ctr/table_shard.hpp): every
// rank holds only its shard's rows, so a step first fetches the rows its batch reads from
// their owners, and after backward sends their gradients back to be summed and applied there.
//
// fetch: the batch's ids deduplicated on the rank, grouped by owner; one all-to-all of the
//   ids, one of the rows back. The fetched rows are numbered in that owner-grouped order (the
//   batch's "slots"), so the gradients go back in the same layout without their ids.
// reduce: each owner sums a row's gradients node by node (the ranks of a node in rank order),
//   then the nodes' sums in node order: the order RowExchange's sparse way sums the replicated
//   table's rows, so both placements train to the same bits (sparse way, no compression).
//
// Every call is a collective over the world: each rank calls fetch then reduce once a step, or
// fetch alone (evaluation), the same number of times.
#pragma once

#include <cstdint>
#include <vector>

#include "ctr/sparse_rows.hpp"
#include "ctr/table_shard.hpp"

namespace sdp {

class World;

class ShardedRows {
 public:
  ShardedRows(const World& world, int width);

  TableShard shard() const;

  // The rows of ids[0 .. count) from their owners (`shard_table`: this rank's rows, as
  // CtrModel::table() holds them): rows() [unique() x width], slots() each id's row in it.
  void fetch(const int64_t* ids, int64_t count, const float* shard_table);
  const int64_t* slots() const { return slots_.data(); }
  const float* rows() const { return rows_.data(); }
  int64_t unique() const { return static_cast<int64_t>(send_ids_.size()); }

  // After fetch: `by_slot` (the gradients of the fetched rows keyed by slot, every slot once,
  // as CtrModel::backward leaves them) to their owners. `out` (reset here) receives this
  // shard's rows that any rank touched, keyed by local row, each summed over the ranks.
  void reduce(const SparseRows& by_slot, RowAccumulator& out);

  // Bytes this rank received in the last fetch and reduce (ids and rows).
  int64_t bytes_received() const { return bytes_received_; }

 private:
  const World& world_;
  int width_;
  TableShard shard_;
  RowAccumulator dedupe_;
  std::vector<int64_t> send_ids_;   // the batch's unique ids, grouped by owner
  std::vector<int> send_counts_, send_offsets_, recv_counts_, recv_offsets_;
  std::vector<int64_t> recv_ids_;   // the ids the other ranks asked this owner for, by rank
  std::vector<int64_t> recv_rows_;  // their local rows
  std::vector<int64_t> slots_;      // each pair's row in rows_
  std::vector<int32_t> slot_of_first_seen_;
  std::vector<float> rows_;         // fetched rows, by slot
  std::vector<float> served_, sent_grads_, received_grads_;
  std::vector<int> row_counts_, row_offsets_, row_recv_counts_, row_recv_offsets_;
  std::vector<RowAccumulator> node_sums_;
  int64_t bytes_received_ = 0;
};

}  // namespace sdp
