#include "distributed/host_work.hpp"

namespace sdp {

void HostWork::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

void HostWork::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = false;
  error_ = nullptr;
}

bool HostWork::finish_locked() const {
  if (done_ && error_) std::rethrow_exception(error_);
  return done_;
}

void HostWork::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  finish_locked();
}

bool HostWork::wait(std::chrono::nanoseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait_for(lock, timeout, [&] { return done_; });
  return finish_locked();
}

bool HostWork::test() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finish_locked();
}

}  // namespace sdp
