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
  const int64_t before = rows_.size();
  const int32_t slot = slot_of(id);
  if (rows_.size() > before) {
    rows_.rows.insert(rows_.rows.end(), row, row + rows_.width);
    return;
  }
  float* sum = rows_.rows.data() + static_cast<int64_t>(slot) * rows_.width;
  for (int j = 0; j < rows_.width; ++j) sum[j] += row[j];
}

void RowAccumulator::prefetch(int64_t id) const {
  const uint64_t h = mix(id) & mask_;
  __builtin_prefetch(keys_.data() + h);
  __builtin_prefetch(slots_.data() + h);
}

int32_t RowAccumulator::slot_of(int64_t id) {
  uint64_t h = mix(id) & mask_;
  while (true) {
    if (keys_[h] == id) return slots_[h];
    if (keys_[h] == -1) break;
    h = (h + 1) & mask_;
  }
  const int32_t slot = static_cast<int32_t>(rows_.size());
  keys_[h] = id;
  slots_[h] = slot;
  rows_.ids.push_back(id);
  if (static_cast<uint64_t>(rows_.size()) * 2 > keys_.size()) grow();
  return slot;
}

const uint32_t* RowAccumulator::assign_slots(const int64_t* ids, int64_t count) {
  pair_slot_.resize(static_cast<size_t>(count));
  // The hash is larger than the caches and the ids random: ask for their buckets ahead.
  constexpr int64_t kAhead = 16;
  for (int64_t p = 0; p < count; ++p) {
    if (p + kAhead < count) prefetch(ids[p + kAhead]);
    const int64_t before = rows_.size();
    const auto slot = static_cast<uint32_t>(slot_of(ids[p]));
    pair_slot_[p] = rows_.size() > before ? slot | kNewSlot : slot;
  }
  rows_.rows.resize(static_cast<size_t>(rows_.size()) * rows_.width);
  return pair_slot_.data();
}

RowAccumulator::Grouping RowAccumulator::group(const int64_t* ids, int64_t count) {
  Grouping g;
  g.fresh = rows_.size();
  // The slots, sequentially (new ids in first-seen order), then each slot's p in order (a
  // counting sort).
  const uint32_t* flagged = assign_slots(ids, count);
  g.slots = rows_.size();
  slot_start_.assign(static_cast<size_t>(g.slots) + 1, 0);
  for (int64_t p = 0; p < count; ++p) ++slot_start_[(flagged[p] & ~kNewSlot) + 1];
  for (int64_t s = 0; s < g.slots; ++s) slot_start_[s + 1] += slot_start_[s];
  by_slot_.resize(static_cast<size_t>(count));
  fill_at_.assign(slot_start_.begin(), slot_start_.end() - 1);
  for (int64_t p = 0; p < count; ++p) by_slot_[fill_at_[flagged[p] & ~kNewSlot]++] = static_cast<int32_t>(p);
  g.start = slot_start_.data();
  g.order = by_slot_.data();
  return g;
}

void RowAccumulator::add_rows(const int64_t* ids, const float* rows, int64_t count) {
  const Grouping g = group(ids, count);
  const int width = rows_.width;
#pragma omp parallel for schedule(dynamic, 256)
  for (int64_t s = 0; s < g.slots; ++s) {
    int32_t at = g.start[s];
    const int32_t last = g.start[s + 1];
    if (at == last) continue;  // an earlier id that these rows do not touch
    float* sum = row(s);
    if (s >= g.fresh) {
      std::memcpy(sum, rows + static_cast<int64_t>(g.order[at]) * width, sizeof(float) * width);
      ++at;
    }
    for (; at < last; ++at) {
      const float* r = rows + static_cast<int64_t>(g.order[at]) * width;
      for (int j = 0; j < width; ++j) sum[j] += r[j];
    }
  }
}

void RowAccumulator::add_all(const SparseRows& other) { add_rows(other.ids.data(), other.rows.data(), other.size()); }

void RowAccumulator::scale(float factor) {
  for (float& v : rows_.rows) v *= factor;
}

}  // namespace sdp
