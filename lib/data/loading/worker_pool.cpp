#include "data/loading/worker_pool.hpp"

#include <stdexcept>

#include "core/floating_point.hpp"

namespace sdp {

WorkerPool::WorkerPool(int workers) {
  if (workers < 1) throw std::logic_error("WorkerPool: needs at least 1 worker");
  for (int w = 1; w < workers; ++w) threads_.push_back(start_thread([this, w] { loop(w); }));
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::take_items(int worker) {
  for (int64_t item = next_.fetch_add(1); item < items_; item = next_.fetch_add(1)) {
    try {
      (*body_)(item, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_.store(items_);  // the others stop at their next item
    }
  }
}

void WorkerPool::loop(int worker) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    lock.unlock();
    take_items(worker);
    lock.lock();
    if (--busy_ == 0) done_cv_.notify_all();
  }
}

void WorkerPool::run(int64_t items, const std::function<void(int64_t, int)>& body) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    items_ = items;
    next_.store(0);
    error_ = nullptr;
    busy_ = static_cast<int>(threads_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  take_items(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return busy_ == 0; });
  body_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace sdp
