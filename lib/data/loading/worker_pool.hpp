// WorkerPool: a fixed set of threads that run one parallel loop at a time with the calling
// thread (the data loader's decoding: data.workers threads per loader). Items are taken from a
// shared counter, so a slow image does not hold back a whole share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sdp {

class WorkerPool {
 public:
  // `workers` >= 1 threads in all: the caller of run() and workers - 1 of the pool's own.
  explicit WorkerPool(int workers);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()) + 1; }
  // Runs body(item, worker) for every item in [0, items), worker in [0, workers()) (0 is the
  // caller), and returns when all are done. After a body throws, the remaining items are
  // skipped and the first exception is rethrown here. One run() at a time.
  void run(int64_t items, const std::function<void(int64_t, int)>& body);

 private:
  void take_items(int worker);
  void loop(int worker);

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t, int)>* body_ = nullptr;
  int64_t items_ = 0;
  std::atomic<int64_t> next_{0};
  int busy_ = 0;              // pool threads still inside this run
  uint64_t generation_ = 0;   // one per run(): a thread works each run once
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace sdp
