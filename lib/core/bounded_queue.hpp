// BoundedQueue: the producer/consumer hand-off under every loader thread (the batch
// prefetcher, the record stream, the Pipe-mode feeder), written once.
//  * push() blocks while the queue holds `capacity` items; it returns false once stop() was
//    called (the item is dropped: the consumer no longer wants anything).
//  * pop() blocks while the queue is empty and open. It returns the items in pushed order, then
//    false once the producer has close()d it, rethrowing the producer's error instead, if it
//    closed with one, after the items pushed before it. After stop() it returns false at once.
//  * stop() (either side) wakes both and makes every later call return false; reset() reopens
//    the queue empty, for a new producer, once the old one has been joined.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <utility>

namespace sdp {

template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  bool push(T&& item) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || items_.size() < capacity_; });
    if (stopped_) return false;
    items_.push_back(std::move(item));
    lock.unlock();
    cv_.notify_all();
    return true;
  }

  bool pop(T& out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || closed_ || !items_.empty(); });
    if (stopped_) return false;
    if (items_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    out = std::move(items_.front());
    items_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return true;
  }

  // The producer is done (with `error`, which pop() rethrows after the items before it).
  void close(std::exception_ptr error = nullptr) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }

  // Whether pop() would return without waiting.
  bool ready() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_ || closed_ || !items_.empty();
  }

  bool stopped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }

  // Waits up to `timeout` for the producer to close the queue; true when it did.
  bool wait_closed(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return closed_; });
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    items_.clear();
    closed_ = stopped_ = false;
    error_ = nullptr;
  }

 private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;                 // guarded by mu_
  bool closed_ = false, stopped_ = false;  // guarded by mu_
  std::exception_ptr error_;            // guarded by mu_
};

}  // namespace sdp
