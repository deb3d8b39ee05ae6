#include "data/loading/prefetcher.hpp"

#include "core/floating_point.hpp"

#include <chrono>

namespace sdp {

Prefetcher::Prefetcher(int depth)
    : depth_(depth < 0 ? 0 : depth), free_(static_cast<std::size_t>(depth_) + 1),
      ready_(static_cast<std::size_t>(depth_) + 1) {
  // depth ready + 1 held by the consumer; depth 0 needs just the held one.
  for (int i = 0; i < depth_ + 1; ++i) pool_.push_back(std::make_unique<Batch>());
}

Prefetcher::~Prefetcher() {
  stop();
}

void Prefetcher::stop() {
  free_.stop();
  ready_.stop();
  if (worker_.joinable()) worker_.join();
  done_ = true;
}

void Prefetcher::start(Producer produce) {
  stop();
  produce_ = std::move(produce);
  free_.reset();
  ready_.reset();
  held_ = nullptr;
  for (auto& b : pool_) {
    Batch* batch = b.get();
    free_.push(std::move(batch));  // never waits: the queue holds the whole pool
  }
  done_ = false;
  wait_seconds_ = 0;
  if (depth_ > 0) worker_ = start_thread(&Prefetcher::run, this);
}

void Prefetcher::run() {
  Batch* batch = nullptr;
  while (free_.pop(batch)) {  // false once stopped
    bool more = false;
    std::exception_ptr error;
    try {
      more = produce_(*batch);
    } catch (...) {
      error = std::current_exception();
    }
    if (!more || error) return ready_.close(error);
    if (!ready_.push(std::move(batch))) return;
  }
}

const Batch* Prefetcher::next() {
  if (depth_ == 0) {
    // Synchronous mode: produce on the caller's thread into the single batch.
    if (done_) return nullptr;
    held_ = pool_.front().get();
    if (produce_(*held_)) return held_;
    done_ = true;
    return nullptr;
  }
  if (held_ != nullptr) {
    free_.push(std::move(held_));  // never waits: the queue holds the whole pool
    held_ = nullptr;
  }
  const bool waits = !ready_.ready();
  const auto t0 = std::chrono::steady_clock::now();
  Batch* batch = nullptr;
  const bool got = ready_.pop(batch);  // rethrows the producer's error after the batches before it
  if (waits) wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!got) return nullptr;
  held_ = batch;
  return held_;
}

}  // namespace sdp
