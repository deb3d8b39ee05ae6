#include "distributed/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace sdp {

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "avg"; }

namespace {

class EventWork final : public Work {
 public:
  explicit EventWork(std::unique_ptr<Event> event) : event_(std::move(event)) {}
  void wait() override { event_->synchronize(); }
  bool wait(std::chrono::nanoseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!event_->query()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
  }
  bool test() override { return event_->query(); }
  void block_stream(Stream& stream) override { event_->block(stream); }

 private:
  std::unique_ptr<Event> event_;
};

}  // namespace

std::shared_ptr<Work> work_after(Stream& stream) {
  if (stream.device().is_cpu()) return completed_work();
  std::unique_ptr<Event> event = stream.make_event();
  event->record();
  return std::make_shared<EventWork>(std::move(event));
}

std::shared_ptr<Work> completed_work() {
  static const std::shared_ptr<Work> done = std::make_shared<CompletedWork>();
  return done;
}

std::vector<int64_t> part_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size(), 0);
  for (std::size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

std::vector<int64_t> split_counts(int64_t count, int parts, int64_t align) {
  std::vector<int64_t> counts(parts, 0);
  if (align <= 1) {
    for (int i = 0; i < parts; ++i) counts[i] = count / parts + (i < count % parts ? 1 : 0);
    return counts;
  }
  int64_t chunk = (count + parts - 1) / parts;
  chunk = (chunk + align - 1) / align * align;
  for (int i = 0; i < parts; ++i) counts[i] = std::clamp<int64_t>(count - i * chunk, 0, chunk);
  return counts;
}

}  // namespace sdp
