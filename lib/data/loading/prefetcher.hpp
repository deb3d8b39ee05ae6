// Prefetcher: runs a batch producer on a worker thread, `depth` batches ahead of the
// consumer, so the step loop does not wait for decoding and normalization.
//
// Contract: one consumer thread calls next(); the producer runs on the worker only
// (depth 0: synchronously inside next(), for debugging). Batches come out in produced
// order. A batch returned by next() stays valid until the following next() / start() /
// destruction, then its buffers are reused (depth + 1 batches exist, no per-batch
// allocation once they have grown). An exception thrown by the producer is rethrown by
// next() after the batches produced before it. Destruction mid-stream stops the worker
// after its current batch and joins it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/loading/batch.hpp"

namespace sdp {

class Prefetcher {
 public:
  // Fills the batch and returns true, or returns false at the end of the stream.
  using Producer = std::function<bool(Batch&)>;

  explicit Prefetcher(int depth);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Stops any current stream (joining the worker) and starts producing from `produce`.
  void start(Producer produce);
  // Stops the worker; next() then returns nullptr.
  void stop();
  // The next batch, or nullptr at the end of the stream.
  const Batch* next();

  int depth() const { return depth_; }
  // Seconds next() spent blocked waiting for the worker since start() (a data stall).
  double wait_seconds() const { return wait_seconds_; }

 private:
  void run();

  const int depth_;
  Producer produce_;
  std::vector<std::unique_ptr<Batch>> pool_;
  std::deque<Batch*> free_, ready_;  // guarded by mu_
  Batch* held_ = nullptr;            // consumer's current batch
  bool done_ = true, stop_ = false;  // guarded by mu_
  std::exception_ptr error_;         // guarded by mu_
  double wait_seconds_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread worker_;
};

}  // namespace sdp
