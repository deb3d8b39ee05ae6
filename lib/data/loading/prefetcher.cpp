#include "data/loading/prefetcher.hpp"

#include "core/floating_point.hpp"

#include <chrono>

namespace sdp {

Prefetcher::Prefetcher(int depth) : depth_(depth < 0 ? 0 : depth) {
  // depth ready + 1 held by the consumer; depth 0 needs just the held one.
  for (int i = 0; i < depth_ + 1; ++i) pool_.push_back(std::make_unique<Batch>());
}

Prefetcher::~Prefetcher() {
  stop();
}

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  ready_.clear();
  error_ = nullptr;
}

void Prefetcher::start(Producer produce) {
  stop();
  produce_ = std::move(produce);
  free_.clear();
  ready_.clear();
  held_ = nullptr;
  for (auto& b : pool_) free_.push_back(b.get());
  error_ = nullptr;
  stop_ = false;
  done_ = false;
  wait_seconds_ = 0;
  if (depth_ > 0) worker_ = start_thread(&Prefetcher::run, this);
}

void Prefetcher::run() {
  for (;;) {
    Batch* batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
      if (stop_) return;
      batch = free_.front();
      free_.pop_front();
    }
    bool more = false;
    std::exception_ptr error;
    try {
      more = produce_(*batch);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (more && !error) {
        ready_.push_back(batch);
      } else {
        free_.push_back(batch);
        error_ = error;
        done_ = true;
      }
    }
    cv_.notify_all();
    if (!more || error) return;
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
  std::unique_lock<std::mutex> lock(mu_);
  if (held_) {
    free_.push_back(held_);
    held_ = nullptr;
    cv_.notify_all();
  }
  if (ready_.empty() && !done_) {
    auto t0 = std::chrono::steady_clock::now();
    cv_.wait(lock, [&] { return !ready_.empty() || done_; });
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (!ready_.empty()) {
    held_ = ready_.front();
    ready_.pop_front();
    return held_;
  }
  if (error_) {
    std::exception_ptr error = error_;
    error_ = nullptr;
    std::rethrow_exception(error);
  }
  return nullptr;
}

}  // namespace sdp
