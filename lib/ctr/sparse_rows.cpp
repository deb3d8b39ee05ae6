#include "ctr/sparse_rows.hpp"

#include <algorithm>
#include <cstring>

namespace sdp {

namespace {

uint64_t mix(int64_t id) {
  uint64_t z = static_cast<uint64_t>(id) * 0x9e3779b97f4a7c15ULL;
  return z ^ (z >> 29);
}

}  // namespace

void RowAccumulator::reset(int width, int64_t expected_ids) {
  rows_.width = width;
  rows_.ids.clear();
  rows_.rows.clear();
  uint64_t capacity = 16;
  while (capacity < static_cast<uint64_t>(expected_ids) * 2) capacity <<= 1;
  if (keys_.size() != capacity) {
    keys_.assign(capacity, -1);
    slots_.assign(capacity, 0);
  } else {
    std::fill(keys_.begin(), keys_.end(), -1);
  }
  mask_ = capacity - 1;
  rows_.ids.reserve(static_cast<size_t>(expected_ids));
  rows_.rows.reserve(static_cast<size_t>(expected_ids) * static_cast<size_t>(width));
}

void RowAccumulator::grow() {
  const uint64_t capacity = keys_.size() * 2;
  keys_.assign(capacity, -1);
  slots_.assign(capacity, 0);
  mask_ = capacity - 1;
  for (int64_t s = 0; s < rows_.size(); ++s) {
    uint64_t h = mix(rows_.ids[s]) & mask_;
    while (keys_[h] != -1) h = (h + 1) & mask_;
    keys_[h] = rows_.ids[s];
    slots_[h] = static_cast<int32_t>(s);
  }
}

void RowAccumulator::add(int64_t id, const float* row) {
  uint64_t h = mix(id) & mask_;
  while (true) {
    if (keys_[h] == id) {
      float* sum = rows_.rows.data() + static_cast<int64_t>(slots_[h]) * rows_.width;
      for (int j = 0; j < rows_.width; ++j) sum[j] += row[j];
      return;
    }
    if (keys_[h] == -1) break;
    h = (h + 1) & mask_;
  }
  keys_[h] = id;
  slots_[h] = static_cast<int32_t>(rows_.size());
  rows_.ids.push_back(id);
  rows_.rows.insert(rows_.rows.end(), row, row + rows_.width);
  if (static_cast<uint64_t>(rows_.size()) * 2 > keys_.size()) grow();
}

void RowAccumulator::add_all(const SparseRows& other) {
  for (int64_t i = 0; i < other.size(); ++i) add(other.ids[i], other.row(i));
}

void RowAccumulator::scale(float factor) {
  for (float& v : rows_.rows) v *= factor;
}

}  // namespace sdp
