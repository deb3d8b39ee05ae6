// The sparse gradient of an embedding table: the ids a step touched, each once, with its
// gradient rows summed. Built by RowAccumulator in a fixed order (the order rows are added),
// so the same inputs give the same bits on every rank.
#pragma once

#include <cstdint>
#include <vector>

namespace sdp {

struct SparseRows {
  int width = 0;
  std::vector<int64_t> ids;  // unique, in the order they were first added
  std::vector<float> rows;   // ids.size() x width

  int64_t size() const { return static_cast<int64_t>(ids.size()); }
  const float* row(int64_t i) const { return rows.data() + i * width; }
};

// Sums rows by id: an open-addressing hash from id to its slot, cleared (not freed) between
// steps. The summation order is the order of add() calls (add_rows: the order of its rows).
class RowAccumulator {
 public:
  // Starts a new set of `width`-float rows; `expected_ids` sizes the hash (no rehash below it).
  void reset(int width, int64_t expected_ids);
  // rows[id] += row (the first add of an id copies it).
  void add(int64_t id, const float* row);
  // Asks for id's hash bucket ahead of its add() (a hint: the hash is larger than the caches).
  void prefetch(int64_t id) const;
  // add(ids[p], rows + p * width) for p = 0 .. count-1: the same ids in the same order and the
  // same sums (each id's rows added in p order), with the additions spread over the threads.
  void add_rows(const int64_t* ids, const float* rows, int64_t count);

  // For rows made while they are summed (the CTR backward's pair gradients): the slot of each
  // of ids[0 .. count) (a new id: a slot at the end, in first-seen order), with kNewSlot set on
  // the p that made its slot (whose row is to be written, not added to). The caller then sums
  // each slot's rows in p order into row(slot); a slot from before the call already holds one.
  static constexpr uint32_t kNewSlot = 0x80000000u;
  const uint32_t* assign_slots(const int64_t* ids, int64_t count);
  float* row(int64_t slot) { return rows_.rows.data() + slot * rows_.width; }
  // Adds every row of `other`, in its order.
  void add_all(const SparseRows& other);
  const SparseRows& rows() const { return rows_; }
  // Multiplies every summed row by `factor` (the mean over ranks, say).
  void scale(float factor);

 private:
  void grow();
  // add_rows' grouping: each of ids[0 .. count) its slot (assign_slots), and each slot's p in
  // order; a slot s < fresh holds a row from before the call.
  struct Grouping {
    int64_t slots = 0, fresh = 0;
    const int32_t* start = nullptr;  // slot s's p: order[start[s] .. start[s + 1])
    const int32_t* order = nullptr;
  };
  Grouping group(const int64_t* ids, int64_t count);
  // The slot of id, inserted (its row not yet written) when new.
  int32_t slot_of(int64_t id);
  SparseRows rows_;
  std::vector<int64_t> keys_;   // -1: empty
  std::vector<int32_t> slots_;  // index into rows_.ids
  uint64_t mask_ = 0;
  std::vector<uint32_t> pair_slot_;  // assign_slots()'
  std::vector<int32_t> slot_start_, by_slot_, fill_at_;  // group()'s
};

}  // namespace sdp
