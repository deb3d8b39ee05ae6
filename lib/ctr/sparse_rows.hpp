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
// steps. Sequential by design: the summation order is the order of add() calls.
class RowAccumulator {
 public:
  // Starts a new set of `width`-float rows; `expected_ids` sizes the hash (no rehash below it).
  void reset(int width, int64_t expected_ids);
  // rows[id] += row (the first add of an id copies it).
  void add(int64_t id, const float* row);
  // Adds every row of `other`, in its order.
  void add_all(const SparseRows& other);
  const SparseRows& rows() const { return rows_; }
  // Multiplies every summed row by `factor` (the mean over ranks, say).
  void scale(float factor);

 private:
  void grow();
  SparseRows rows_;
  std::vector<int64_t> keys_;   // -1: empty
  std::vector<int32_t> slots_;  // index into rows_.ids
  uint64_t mask_ = 0;
};

}  // namespace sdp
