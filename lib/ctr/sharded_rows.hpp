// A row-sharded table's traffic (model.embedding_sharding: rows; ctr/table_shard.hpp): every
// rank holds only its shard's rows, so a step first fetches the rows its batch reads from
// their owners, and after backward sends their gradients back to be summed and applied there.
//
// fetch: the batch's ids deduplicated on the rank. Where ranks share a node, each id then goes
//   to one of the node's ranks, its forwarder ((id % world) % local ranks: the owner itself
//   when the owner is on the node), which deduplicates the node's requests: an id crosses to
//   its owner once a node. The owners send the rows back the same way. The fetched rows are
//   numbered in the order the ids went (the batch's "slots"), so the gradients go back in the
//   same layouts without their ids.
// reduce: each forwarder sums its node's gradients of a row in local-rank order, and each owner
//   sums the nodes' sums in node order: the order RowExchange's sparse way sums the replicated
//   table's rows, so both placements train to the same bits (sparse way, no compression).
//
// Every call is a collective over the world: each rank calls fetch then reduce once a step, or
// fetch alone (evaluation), the same number of times.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "ctr/sparse_rows.hpp"
#include "ctr/table_shard.hpp"

namespace sdp {

class World;

class ShardedRows {
 public:
  ShardedRows(const World& world, int width);

  TableShard shard() const { return shard_; }

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

  // Rows this rank served as an owner in the last fetch: over the world, each node's unique ids.
  int64_t served() const { return static_cast<int64_t>(asked_ids_.size()); }
  // Bytes this rank received in the last fetch and reduce (ids and rows).
  int64_t bytes_received() const { return bytes_received_; }

  // One all-to-all's layout: the ids each peer is sent and receives; rows move the same way,
  // or back, `width` floats an id.
  struct Layout {
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<int> send_counts, send_offsets, recv_counts, recv_offsets;
    std::vector<int> row_send_counts, row_send_offsets, row_recv_counts, row_recv_offsets;
    int64_t received() const;
    // With send_counts set: each peer's counts exchanged, the offsets made. Collective.
    void agree(MPI_Comm comm, int width);
    void ids(const int64_t* send, int64_t* recv) const;
    void rows(const float* send, float* recv) const;       // the way the ids went
    void rows_back(const float* send, float* recv) const;  // from the receivers to the senders
  };

 private:
  const World& world_;
  int width_;
  TableShard shard_;
  int local_;  // ranks on this node
  Layout to_forwarders_, to_owners_;
  RowAccumulator dedupe_, node_dedupe_, node_sums_;
  std::vector<int64_t> send_ids_;   // the batch's unique ids, grouped by forwarder (the slots)
  std::vector<int64_t> node_ids_;   // forwarder: the ids its node's ranks asked it for, by local rank
  std::vector<int64_t> owner_ids_;  // forwarder: its node's unique ids among them, grouped by owner
  std::vector<int64_t> node_slot_;  // forwarder: each of node_ids_' place in owner_ids_
  std::vector<int64_t> asked_ids_;  // owner: the ids the forwarders asked for, by rank
  std::vector<int64_t> asked_rows_; // owner: their local rows
  std::vector<int64_t> slots_;      // each pair's row in rows_
  std::vector<int> fill_;
  std::vector<int64_t> place_;
  std::vector<float> rows_;         // fetched rows, by slot
  std::vector<float> served_, owner_rows_, node_rows_, sent_grads_, node_grads_, owner_grads_, asked_grads_;
  int64_t bytes_received_ = 0;
};

}  // namespace sdp
