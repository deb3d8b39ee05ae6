// HostWork: a Work completed by a host thread, e.g. the communication thread that runs a
// gradient bucket's blocking collective (gradient_reducer.hpp). Other threads poll it with
// test() / wait(timeout) (the watchdog does), which only touch this object's mutex: no MPI
// call, so MPI stays SERIALIZED.
//
// Lifecycle: reset() -> (runner) complete(error) -> waiters return, rethrowing `error`.
// Reusable: reset() it once every waiter is done, so a bucket's Work costs no allocation per
// step.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>

#include "distributed/communicator.hpp"

namespace sdp {

class HostWork final : public Work {
 public:
  // Marks the operation finished; `error` (may be null) is rethrown to every waiter.
  void complete(std::exception_ptr error = nullptr);
  // Makes the Work pending again (the runner has not started the next use yet).
  void reset();

  void wait() override;
  bool wait(std::chrono::nanoseconds timeout) override;
  bool test() override;

 private:
  bool finish_locked() const;  // true when done; throws the error if it failed
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace sdp
