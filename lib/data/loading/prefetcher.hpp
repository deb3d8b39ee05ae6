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

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/bounded_queue.hpp"
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
  // The pool's batches go round: free (the worker fills them), ready (in produced order, the
  // producer's end or error closing it), held by the consumer.
  BoundedQueue<Batch*> free_, ready_;
  Batch* held_ = nullptr;
  bool done_ = true;  // depth 0: the producer reached the end
  double wait_seconds_ = 0;
  std::thread worker_;
};

}  // namespace sdp
