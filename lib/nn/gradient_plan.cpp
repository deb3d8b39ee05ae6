#include "nn/gradient_plan.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "core/device_memory.hpp"

namespace sdp::nn {

namespace {
// oneDNN's own allocations are 64-byte aligned; planned buffers keep that (and their
// kernels the same code paths).
constexpr std::size_t kAlign = 64;

uint64_t next_generation() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}
}  // namespace

GradientPlan::GradientPlan() : generation_(next_generation()) {}

void GradientPlan::clear() {
  // A new generation: buffers recorded before read as unrecorded, without touching them
  // (their layers may be gone).
  generation_ = next_generation();
  now_ = 0;
  records_.clear();
  arena_.reset();
  arena_bytes_ = 0;
}

GradientPlan::Record& GradientPlan::record(Buffer& buffer) {
  if (buffer.generation != generation_) {
    buffer.generation = generation_;
    buffer.index = static_cast<int>(records_.size());
    records_.push_back({&buffer, now_, now_});
  }
  return records_[buffer.index];
}

void GradientPlan::read(Buffer* buffer) {
  if (buffer == nullptr) return;
  if (buffer->generation != generation_)
    throw std::logic_error("GradientPlan: a buffer is read before anything wrote it");
  Record& r = records_[buffer->index];
  r.last = std::max(r.last, now_);
}

GradientPlan::Buffer* GradientPlan::write(Buffer* buffer) {
  if (buffer == nullptr) return nullptr;
  if (arena_) throw std::logic_error("GradientPlan: write after allocate");
  Record& r = record(*buffer);
  r.last = std::max(r.last, now_);
  return buffer;
}

std::size_t GradientPlan::separate_bytes() const {
  std::size_t total = 0;
  for (const Record& r : records_) total += r.buffer->bytes;
  return total;
}

std::size_t GradientPlan::peak_live_bytes() const {
  // +bytes where a lifetime starts, -bytes after it ends; the running sum's maximum.
  std::vector<std::pair<int, std::int64_t>> events;
  for (const Record& r : records_) {
    const auto bytes = static_cast<std::int64_t>((r.buffer->bytes + kAlign - 1) / kAlign * kAlign);
    events.emplace_back(r.first, bytes);
    events.emplace_back(r.last + 1, -bytes);
  }
  std::sort(events.begin(), events.end());  // at one operation, the ends (negative) first
  std::int64_t live = 0, peak = 0;
  for (const auto& [when, bytes] : events) {
    live += bytes;
    peak = std::max(peak, live);
  }
  return static_cast<std::size_t>(peak);
}

void GradientPlan::allocate(const Device& device) {
  const auto rounded = [](std::size_t b) { return (b + kAlign - 1) / kAlign * kAlign; };
  // Greedy by size (largest first), each at the lowest offset free of every placed buffer
  // whose lifetime overlaps: the usual offset planner, near-optimal for chains.
  std::vector<Record*> order;
  for (Record& r : records_) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const Record* a, const Record* b) {
    return a->buffer->bytes > b->buffer->bytes;
  });
  std::vector<const Record*> placed;
  std::size_t total = 0;
  for (Record* r : order) {
    std::vector<std::pair<std::size_t, std::size_t>> busy;  // [begin, end) in the arena
    for (const Record* p : placed)
      if (p->first <= r->last && r->first <= p->last)
        busy.emplace_back(p->offset, p->offset + rounded(p->buffer->bytes));
    std::sort(busy.begin(), busy.end());
    std::size_t offset = 0;
    const std::size_t size = rounded(r->buffer->bytes);
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    r->offset = offset;
    total = std::max(total, offset + size);
    placed.push_back(r);
  }
  arena_bytes_ = total;
  const MemoryPurposeScope purpose(MemoryPurpose::kArena);
  arena_ = total > 0 ? sdp::allocate(device, total) : nullptr;
  for (Record& r : records_)
    if (r.buffer->bind) r.buffer->bind(static_cast<char*>(arena_.get()) + r.offset);
}

}  // namespace sdp::nn
